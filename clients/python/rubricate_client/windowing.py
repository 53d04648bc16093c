"""The windowed curriculum (RubricEM App. D.3).

Each window of 2K steps: K fresh batches with cross-episode retrieval, then the same K
batches, in the same order, with within-episode retrieval. The K-step gap lets the deferred
reflection of a batch reach the bank before that batch is replayed.
"""

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Final, TypeVar

from rubricate_client.errors import DomainError
from rubricate_client.schemas.bank import RetrievalMode

# RubricEM App. D.3: window size K = 3 in the paper's experiments.
DEFAULT_WINDOW: Final = 3

T = TypeVar("T")


def windowed_curriculum(
    batches: Iterable[T], *, k: int = DEFAULT_WINDOW
) -> Iterator[tuple[T, RetrievalMode]]:
    """Yield (batch, mode) per training step: K new batches ("cross"), then the same K
    replayed ("within"), window after window. A last window with fewer than K batches is
    replayed the same way. Reads `batches` lazily (K at a time)."""
    if k < 1:
        raise DomainError(f"window size K must be at least 1, got {k}", field="k")
    source = iter(batches)
    while True:
        window = list(islice(source, k))
        if not window:
            return
        for batch in window:
            yield batch, "cross"
        for batch in window:
            yield batch, "within"


def batched(items: Iterable[T], *, size: int) -> Iterator[list[T]]:
    """Consecutive batches of `size` items (the last may be shorter)."""
    if size < 1:
        raise DomainError(f"batch size must be at least 1, got {size}", field="batch_size")
    source = iter(items)
    while chunk := list(islice(source, size)):
        yield chunk
