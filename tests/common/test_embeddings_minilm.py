"""The NumPy all-MiniLM-L6-v2 against sentence-transformers, on the real bundled model."""

import math
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rubricate.common.embeddings import (
    DEFAULT_EMBEDDING_MODEL,
    MINILM_DIM,
    EmbeddingSettings,
    NumpyMiniLMEmbedder,
    SentenceTransformerEmbedder,
    bundled_model_path,
    make_embedder,
    shared_embedder,
)
from rubricate.common.minilm import MiniLM, erfc_nonneg, gelu

LONG = " ".join(f"Paragraph {i} explains why the orbiter's thrusters misfired." for i in range(60))

TEXTS = [
    "Why was the Mars Climate Orbiter lost in 1999?",
    "How do sourdough starters leaven bread?",
    "a",
    "",  # [CLS] [SEP] only
    "   \t\n ",  # whitespace only: the same
    "UPPER lower MiXeD CaSe",  # lower-casing is in the tokenizer
    "Café déjà vu: naïve façade, Ünïcödé, ÀÉÎ",  # accents are kept (strip_accents: None)
    "東京は日本の首都です。北京是中国的首都。",  # CJK characters split one by one
    "Привет, мир! Ωμέγα καὶ ἄλφα. اللغة العربية",
    "emoji 🤖🚀 and symbols ☃ ∑ ≠ →",  # unknown pieces: [UNK]
    "zero\u200bwidth, no\u00a0break and a \x00 control character",
    "[CLS] [SEP] [PAD] [MASK] [UNK] written out in the text",
    "1234567890 3.14159 e=mc^2 <html>&amp;</html> https://example.org/a?b=c",
    "x" * 1000,  # one long word: [UNK] (max_input_chars_per_word 100)
    LONG,  # > 256 tokens: truncated
    "The quick brown fox jumps over the lazy dog. " * 40,  # > 256 tokens
    "What are the tax rules for capital gains on shares in Germany?",
    "Which yeast strains are used for baking bread?",
    "  leading and trailing whitespace  ",
    "Is it true that vaccines train the immune system to recognise a pathogen's proteins?",
]


@pytest.fixture(scope="module")
def minilm() -> NumpyMiniLMEmbedder:
    return NumpyMiniLMEmbedder()


@pytest.fixture(scope="module")
def reference() -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(bundled_model_path()), device="cpu")


def st_vectors(model: Any, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
    vectors = model.encode(
        list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.asarray(vectors, dtype=np.float32)


def test_tokens_match_sentence_transformers(minilm: NumpyMiniLMEmbedder, reference: Any) -> None:
    preprocess = getattr(reference, "preprocess", None) or reference.tokenize
    features = preprocess(TEXTS)
    ids, mask = features["input_ids"].tolist(), features["attention_mask"].tolist()
    expected = [
        [t for t, m in zip(row, keep, strict=True) if m]
        for row, keep in zip(ids, mask, strict=True)
    ]
    model: MiniLM = minilm._model
    got = model.token_ids(TEXTS)
    for text, want, have in zip(TEXTS, expected, got, strict=True):
        assert have == want, text[:40]
    assert reference.max_seq_length == model.max_seq_length == 256
    assert len(got[TEXTS.index(LONG)]) == 256  # truncated, [SEP] last
    assert got[TEXTS.index(LONG)][-1] == got[0][-1]


def test_vectors_match_sentence_transformers(minilm: NumpyMiniLMEmbedder, reference: Any) -> None:
    expected = st_vectors(reference, TEXTS)
    got = np.asarray(minilm.embed(TEXTS), dtype=np.float32)
    assert got.shape == expected.shape == (len(TEXTS), MINILM_DIM)
    difference = np.abs(got - expected).max(axis=1)
    cosine = (got.astype(np.float64) * expected).sum(axis=1)
    for text, diff, cos in zip(TEXTS, difference, cosine, strict=True):
        assert diff < 1e-4, (text[:40], diff)
        assert cos > 0.99999, (text[:40], cos)


def test_batch_equals_single(minilm: NumpyMiniLMEmbedder) -> None:
    """Texts are sorted by length and padded per batch: a text's vector does not depend on its
    neighbours (to float rounding: the padded matrix products differ in shape)."""
    batched = np.asarray(minilm.embed(TEXTS))
    single = np.asarray([minilm.embed([t])[0] for t in TEXTS])
    np.testing.assert_allclose(batched, single, rtol=0, atol=1e-6)
    small_batches = NumpyMiniLMEmbedder(EmbeddingSettings(batch_size=3))
    np.testing.assert_allclose(small_batches.embed(TEXTS), batched, rtol=0, atol=1e-6)


def test_public_behaviour(minilm: NumpyMiniLMEmbedder) -> None:
    assert minilm.name == DEFAULT_EMBEDDING_MODEL
    assert minilm.dim == MINILM_DIM == 384
    assert minilm.embed([]) == []
    vectors = minilm.embed(TEXTS)
    assert all(isinstance(x, float) for row in vectors for x in row)
    norms = np.linalg.norm(np.asarray(vectors, dtype=np.float64), axis=1)
    np.testing.assert_allclose(norms, 1.0, rtol=0, atol=1e-5)
    # inner product = cosine: related questions are closer than unrelated ones
    v = np.asarray(minilm.embed(["How is bread leavened?", *TEXTS[:2]]))
    assert v[0] @ v[2] > v[0] @ v[1] + 0.2


def test_concurrent_calls_give_the_same_vectors(minilm: NumpyMiniLMEmbedder) -> None:
    expected = minilm.embed(TEXTS[:6])
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda _: minilm.embed(TEXTS[:6]), range(3)))
    for got in results:
        assert got == expected


def test_factory_uses_numpy_for_the_bundled_model() -> None:
    assert isinstance(make_embedder(EmbeddingSettings()), NumpyMiniLMEmbedder)
    assert isinstance(shared_embedder(), NumpyMiniLMEmbedder)


def test_the_bundled_model_needs_no_torch() -> None:
    code = (
        "import sys\n"
        "from rubricate.common.embeddings import shared_embedder\n"
        "[v] = shared_embedder().embed(['does this import torch?'])\n"
        "assert len(v) == 384, len(v)\n"
        "heavy = sorted(m for m in ('torch', 'sentence_transformers', 'transformers')"
        " if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_missing_embeddings_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import fails
    with pytest.raises(RuntimeError, match=r"pip install 'rubricate\[embeddings\]'"):
        NumpyMiniLMEmbedder()


def test_a_local_folder_without_sentence_transformers_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    settings = EmbeddingSettings(model=str(tmp_path))
    with pytest.raises(RuntimeError, match=r"pip install 'rubricate\[miner\]'"):
        make_embedder(settings)
    with pytest.raises(RuntimeError, match=r"pip install 'rubricate\[miner\]'"):
        SentenceTransformerEmbedder(EmbeddingSettings(device="cuda"))


def test_erf_approximation_error_is_below_1e_6() -> None:
    x = np.linspace(0.0, 12.0, 200_001, dtype=np.float32)
    exact = np.array([math.erfc(float(v)) for v in x])
    assert np.abs(erfc_nonneg(x) - exact).max() < 1e-6
    x = np.linspace(-12.0, 12.0, 200_001, dtype=np.float32)
    exact_gelu = np.array([float(v) * 0.5 * math.erfc(-float(v) / math.sqrt(2.0)) for v in x])
    error = np.abs(gelu(x).astype(np.float64) - exact_gelu)
    assert (error / np.maximum(1.0, np.abs(x))).max() < 1e-6
