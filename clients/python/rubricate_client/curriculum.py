"""The windowed curriculum for trainers (RubricEM App. D.3).

    for batch, mode in windowed_curriculum(dataset, k=3, batch_size=32):
        for question in batch:
            r = client.post("/v1/bank/retrieve", json={"question": question, "mode": mode})
            prompt = r.json()["prompt"]   # the <reference_examples> block, then the question
        ...

K new batches with cross-episode retrieval, then the same K batches with within-episode
retrieval, window after window; the K-step gap lets each batch's deferred reflection reach
the bank before the batch is replayed.
"""

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar, overload

from rubricate_client.schemas.bank import RetrievalMode
from rubricate_client.windowing import DEFAULT_WINDOW, batched
from rubricate_client.windowing import windowed_curriculum as _windowed

T = TypeVar("T")

__all__ = ["DEFAULT_WINDOW", "windowed_curriculum"]


@overload
def windowed_curriculum(
    dataset: Iterable[T], *, k: int = ..., batch_size: int
) -> Iterator[tuple[list[T], RetrievalMode]]: ...


@overload
def windowed_curriculum(
    dataset: Iterable[T], *, k: int = ..., batch_size: None = None
) -> Iterator[tuple[T, RetrievalMode]]: ...


def windowed_curriculum(
    dataset: Iterable[Any], *, k: int = DEFAULT_WINDOW, batch_size: int | None = None
) -> Iterator[tuple[Any, RetrievalMode]]:
    """Yield (batch, mode) per training step, mode "cross" or "within".

    `dataset`: batches already, or items when `batch_size` is given (then consecutive
    items are grouped into batches of that size). Lazy: reads K batches at a time.
    """
    batches: Iterable[Any] = dataset if batch_size is None else batched(dataset, size=batch_size)
    return _windowed(batches, k=k)
