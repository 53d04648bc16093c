"""all-MiniLM-L6-v2 in NumPy: the sentence-transformers pipeline of a BERT model without torch.

What sentence-transformers does for this model (modules.json: Transformer, Pooling, Normalize),
step by step:
- tokenize with the model's `tokenizer.json` (the `tokenizers` library; lower-casing is part of
  its normalizer), truncated to `max_seq_length` of `sentence_bert_config.json` (256 here; the
  file's own 128-token truncation and fixed padding are replaced), padded to the longest text
  of the batch, with an attention mask;
- the BERT encoder (`config.json`): word + position + token-type embeddings and LayerNorm, then
  per layer self-attention over the unmasked tokens, dense + residual + LayerNorm, intermediate
  dense with the exact (erf) GELU, output dense + residual + LayerNorm;
- mean pooling over the attention mask, then L2 normalization.
Weights come from `model.safetensors` as NumPy arrays; everything runs in float32 and matches
sentence-transformers to about 1e-6 per component (tests/common/test_embeddings_minilm.py).

`tokenizers` and `safetensors` are imported when a model is loaded, so importing this module
costs NumPy only. `rubricate.common.embeddings.NumpyMiniLMEmbedder` serves it as an `Embedder`.
"""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

F32 = NDArray[np.float32]

_ATTENTION_FLOATS: Final = 1 << 20
"""Attention scores computed at once (4 MiB of float32): sequences are chunked to fit."""
_SMALL_GEMM: Final = 65536 * 4
"""Attention products are split by query rows to stay at or under this m·n·k: OpenBLAS runs
such a GEMM on the calling thread, larger ones on its pool. Attention makes one product per
sequence and head, and waking the pool for each of these small products costs more than the
product, catastrophically so when the cores are shared (measured: 0.1 s against 6 s for the
query-key products of 64 sequences of 256 tokens on 2 busy cores)."""
_ROW_BLOCK: Final = 4096
"""Token rows per block of the query/key/value projection and of the feed-forward part: bounds
their wide intermediates (18 and 24 MiB) while keeping the matrix products large (blocks of a
few hundred rows ran BLAS several times slower here)."""
_GELU_ROWS: Final = 64
"""Rows of the intermediate per GELU call: its ~20 elementwise passes stay in cache."""
_MASKED: Final = float(np.finfo(np.float32).min)
"""Added to the scores of padding keys, as transformers does: exp() of it is 0."""

# Abramowitz & Stegun 7.1.26: erfc(a) = t·P(t)·exp(-a²), t = 1/(1 + p·a), a >= 0, absolute
# error < 1.5e-7 (< 6.1e-7 evaluated in float32 over [-12, 12], measured against math.erf).
_ERF_P: Final = 0.3275911
_ERF_A: Final = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
_SQRT_HALF: Final = math.sqrt(0.5)


def erfc_nonneg(a: F32) -> F32:
    """erfc(a) for a >= 0 (Abramowitz & Stegun 7.1.26, absolute error < 1.5e-7)."""
    return _half_erfc_scaled(a, scale=1.0) * np.float32(2.0)


def _half_erfc_scaled(a: F32, scale: float) -> F32:
    """erfc(scale·a) / 2 for a >= 0: A&S 7.1.26 with the scale and the 1/2 folded into the
    constants (one pass over the array fewer each)."""
    t = a * np.float32(_ERF_P * scale)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = t * np.float32(_ERF_A[0] / 2)
    for coefficient in _ERF_A[1:]:
        poly += np.float32(coefficient / 2)
        poly *= t
    decay = np.square(a)
    decay *= np.float32(-scale * scale)
    np.exp(decay, out=decay)  # exp(-(scale·a)²)
    poly *= decay
    return poly


def gelu(x: F32, out: F32 | None = None) -> F32:
    """The exact GELU, x·Φ(x) = x/2·(1 + erf(x/√2)), as max(x, 0) - |x|/2·erfc(|x|/√2): for
    x >= 0 that is x - x/2·erfc(x/√2), for x < 0 it is x/2·erfc(-x/√2); no cancellation for
    large negative x. Into `out` (which may be `x`), else a new array."""
    magnitude = np.abs(x)
    tail = _half_erfc_scaled(magnitude, scale=_SQRT_HALF)  # erfc(|x|/√2) / 2
    tail *= magnitude
    result = np.maximum(x, np.float32(0.0), out=out)
    result -= tail
    return result


def layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    """LayerNorm over the last axis (biased variance, as torch), in place: returns `x`."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("...i,...i->...", x, x)[..., None]  # sum of squares, no temporary
    var /= np.float32(x.shape[-1])
    var += np.float32(eps)
    x /= np.sqrt(var)
    x *= weight
    x += bias
    return x


@dataclass(frozen=True)
class _Layer:
    """One encoder layer; matrices are (in, out) for `x @ w`."""

    qkv_w: F32  # (H, 3H): query (pre-scaled by 1/sqrt(head_dim)), key, value
    qkv_b: F32
    attn_out_w: F32
    attn_out_b: F32
    attn_ln_w: F32
    attn_ln_b: F32
    inter_w: F32
    inter_b: F32
    out_w: F32
    out_b: F32
    out_ln_w: F32
    out_ln_b: F32


@dataclass(frozen=True)
class BertConfig:
    """What the forward pass reads of `config.json` (other BERT variants are refused)."""

    hidden_size: int
    num_heads: int
    num_layers: int
    layer_norm_eps: float
    max_position_embeddings: int

    @classmethod
    def from_file(cls, path: Path) -> "BertConfig":
        raw = json.loads(path.read_text(encoding="utf-8"))
        unsupported = {
            "model_type": (raw.get("model_type"), {"bert"}),
            "hidden_act": (raw.get("hidden_act"), {"gelu"}),
            "position_embedding_type": (
                raw.get("position_embedding_type", "absolute"),
                {"absolute"},
            ),
        }
        for key, (value, allowed) in unsupported.items():
            if value not in allowed:
                raise ValueError(f"{path}: {key}={value!r} is not supported (only {allowed})")
        config = cls(
            hidden_size=int(raw["hidden_size"]),
            num_heads=int(raw["num_attention_heads"]),
            num_layers=int(raw["num_hidden_layers"]),
            layer_norm_eps=float(raw["layer_norm_eps"]),
            max_position_embeddings=int(raw["max_position_embeddings"]),
        )
        if config.hidden_size % config.num_heads:
            raise ValueError(f"{path}: hidden_size is not a multiple of num_attention_heads")
        return config


class BertEncoder:
    """The BERT forward pass with mean pooling and L2 normalization, in NumPy float32."""

    def __init__(self, config: BertConfig, weights: dict[str, NDArray[Any]]) -> None:
        self.config = config
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

        def w(name: str) -> F32:
            return np.ascontiguousarray(weights[prefix + name], dtype=np.float32)

        def linear(name: str, scale: float = 1.0) -> tuple[F32, F32]:
            """(in, out) for `x @ weight`: a transposed view, no copy (BLAS reads it as is)."""
            weight, bias = w(f"{name}.weight").T, w(f"{name}.bias")
            if scale != 1.0:
                weight, bias = weight * np.float32(scale), bias * np.float32(scale)
            return weight, bias

        self.word = w("embeddings.word_embeddings.weight")
        self.position = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")
        self.emb_ln_w = w("embeddings.LayerNorm.weight")
        self.emb_ln_b = w("embeddings.LayerNorm.bias")
        self.dim = int(self.word.shape[1])
        if self.dim != config.hidden_size:
            raise ValueError(f"word embeddings of width {self.dim} != hidden_size")
        self.head_dim = config.hidden_size // config.num_heads
        scale = 1.0 / math.sqrt(self.head_dim)
        layers = []
        for i in range(config.num_layers):
            p = f"encoder.layer.{i}."
            q_w, q_b = linear(p + "attention.self.query", scale)
            k_w, k_b = linear(p + "attention.self.key")
            v_w, v_b = linear(p + "attention.self.value")
            attn_out_w, attn_out_b = linear(p + "attention.output.dense")
            inter_w, inter_b = linear(p + "intermediate.dense")
            out_w, out_b = linear(p + "output.dense")
            layers.append(
                _Layer(
                    qkv_w=np.concatenate([q_w, k_w, v_w], axis=1),
                    qkv_b=np.concatenate([q_b, k_b, v_b]),
                    attn_out_w=attn_out_w,
                    attn_out_b=attn_out_b,
                    attn_ln_w=w(p + "attention.output.LayerNorm.weight"),
                    attn_ln_b=w(p + "attention.output.LayerNorm.bias"),
                    inter_w=inter_w,
                    inter_b=inter_b,
                    out_w=out_w,
                    out_b=out_b,
                    out_ln_w=w(p + "output.LayerNorm.weight"),
                    out_ln_b=w(p + "output.LayerNorm.bias"),
                )
            )
        self.layers = tuple(layers)

    def __call__(
        self, input_ids: NDArray[np.int64], token_type_ids: NDArray[np.int64], mask: NDArray[Any]
    ) -> F32:
        """(batch, seq) token ids, token types and attention mask (1 = token, 0 = padding) ->
        (batch, hidden) mean-pooled, L2-normalized sentence vectors."""
        batch, seq = input_ids.shape
        if seq > self.position.shape[0]:
            raise ValueError(f"{seq} tokens > {self.position.shape[0]} positions")
        keep = mask.astype(np.float32)
        h = self.word[input_ids]
        h += self.position[:seq]
        h += self.token_type[token_type_ids]
        x = layer_norm(h, self.emb_ln_w, self.emb_ln_b, self.config.layer_norm_eps)
        x = x.reshape(batch * seq, self.dim)
        key_bias = (
            None  # no padding in this batch
            if keep.all()
            else ((np.float32(1.0) - keep) * np.float32(_MASKED))[:, None, None, :]
        )
        for layer in self.layers:
            x = self._layer(layer, x, key_bias, batch, seq)
        hidden = x.reshape(batch, seq, self.dim)
        summed = np.einsum("bsh,bs->bh", hidden, keep)
        counts = np.maximum(keep.sum(axis=1, keepdims=True), np.float32(1e-9))
        pooled: F32 = summed / counts
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        pooled /= np.maximum(norms, np.float32(1e-12))
        return pooled

    def _layer(self, layer: _Layer, x: F32, key_bias: F32 | None, batch: int, seq: int) -> F32:
        """One encoder layer over (batch·seq, hidden) rows."""
        attended = self._attention(layer, x, key_bias, batch, seq) @ layer.attn_out_w
        attended += layer.attn_out_b
        attended += x
        a = layer_norm(attended, layer.attn_ln_w, layer.attn_ln_b, self.config.layer_norm_eps)
        out = np.empty_like(a)
        for start in range(0, a.shape[0], _ROW_BLOCK):
            block = a[start : start + _ROW_BLOCK]
            inter: F32 = block @ layer.inter_w
            inter += layer.inter_b
            for sub in range(0, inter.shape[0], _GELU_ROWS):  # cache-sized, in place
                part = inter[sub : sub + _GELU_ROWS]
                gelu(part, out=part)
            y = inter @ layer.out_w
            y += layer.out_b
            y += block
            out[start : start + _ROW_BLOCK] = layer_norm(
                y, layer.out_ln_w, layer.out_ln_b, self.config.layer_norm_eps
            )
        return out

    def _attention(self, layer: _Layer, x: F32, key_bias: F32 | None, batch: int, seq: int) -> F32:
        """Multi-head self-attention of (batch·seq, hidden) rows: the per-head contexts,
        concatenated, (batch·seq, hidden), before the output projection. Queries, keys and
        values are projected for about `_ROW_BLOCK` tokens at a time (bounded memory, large
        products), the scores for `_ATTENTION_FLOATS` at a time."""
        heads, head_dim = self.config.num_heads, self.head_dim
        context = np.empty((batch, seq, heads, head_dim), dtype=np.float32)
        group = max(1, _ROW_BLOCK // seq)  # sequences per projection
        chunk = max(1, _ATTENTION_FLOATS // (heads * seq * seq))  # sequences per scores array
        query_rows = max(1, _SMALL_GEMM // (seq * head_dim))  # query rows per product
        for g in range(0, batch, group):
            n = min(batch, g + group) - g
            qkv = x[g * seq : (g + n) * seq] @ layer.qkv_w
            qkv += layer.qkv_b
            # (n·seq, 3H) -> (3, n, heads, seq, head_dim), contiguous: BLAS-friendly slices
            qkv5 = np.ascontiguousarray(
                qkv.reshape(n, seq, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            )
            del qkv
            for start in range(0, n, chunk):
                end = min(n, start + chunk)
                q, k, v = qkv5[0, start:end], qkv5[1, start:end], qkv5[2, start:end]
                k_t = k.swapaxes(-1, -2)
                scores = np.empty((end - start, heads, seq, seq), dtype=np.float32)
                for r in range(0, seq, query_rows):  # q is pre-scaled by 1/sqrt(head_dim)
                    rs = slice(r, r + query_rows)
                    np.matmul(q[:, :, rs], k_t, out=scores[:, :, rs])
                if key_bias is not None:
                    scores += key_bias[g + start : g + end]
                scores -= scores.max(axis=-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(axis=-1, keepdims=True)
                per_head = np.empty((end - start, heads, seq, head_dim), dtype=np.float32)
                for r in range(0, seq, query_rows):
                    rs = slice(r, r + query_rows)
                    np.matmul(scores[:, :, rs], v, out=per_head[:, :, rs])
                context[g + start : g + end] = per_head.transpose(0, 2, 1, 3)
        return context.reshape(batch * seq, self.dim)


class MiniLM:
    """A sentence-transformers folder of a BERT model with mean pooling (all-MiniLM-L6-v2):
    its tokenizer and encoder. Loading imports `tokenizers` and `safetensors` (an ImportError
    when one is missing); `encode` keeps no state, so concurrent calls are safe."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        _check_pipeline(folder)
        config = BertConfig.from_file(folder / "config.json")
        self.max_seq_length = min(_max_seq_length(folder), config.max_position_embeddings)
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        tokenizer.no_padding()  # tokenizer.json pads to 128: each batch is padded in `encode`
        pad_id = tokenizer.token_to_id("[PAD]")
        self._pad_id = 0 if pad_id is None else pad_id
        self._tokenizer = tokenizer
        self._encoder = BertEncoder(config, load_file(folder / "model.safetensors"))
        self.dim = self._encoder.dim

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids of each text: [CLS] ... [SEP], truncated to `max_seq_length`."""
        return [e.ids for e in self._tokenizer.encode_batch(list(texts))]

    def encode(self, texts: Sequence[str], batch_size: int) -> F32:
        """(len(texts), dim) float32 unit vectors. Texts are batched by token length (longest
        first, `batch_size` at a time, like sentence-transformers) so that padding stays small;
        a text's vector does not depend on its batch (to float rounding, ~1e-7)."""
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = [e.ids for e in encodings]
        type_ids = [e.type_ids for e in encodings]
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            seq = len(ids[batch[0]])  # padded to the longest text of the batch
            input_ids = np.full((len(batch), seq), self._pad_id, dtype=np.int64)
            token_types = np.zeros((len(batch), seq), dtype=np.int64)
            mask = np.zeros((len(batch), seq), dtype=np.int64)
            for row, i in enumerate(batch):
                n = len(ids[i])
                input_ids[row, :n] = ids[i]
                token_types[row, :n] = type_ids[i]
                mask[row, :n] = 1
            out[batch] = self._encoder(input_ids, token_types, mask)
        return out


def _check_pipeline(folder: Path) -> None:
    """Only Transformer -> mean Pooling (-> Normalize) pipelines are computed here."""
    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"]):
        raise ValueError(f"{folder}: modules {kinds} are not Transformer, Pooling, Normalize")
    pooling_path = folder / modules[1]["path"] / "config.json"
    pooling = json.loads(pooling_path.read_text(encoding="utf-8"))
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    if modes != {"pooling_mode_mean_tokens"}:
        raise ValueError(f"{pooling_path}: pooling {sorted(modes)} is not mean pooling")


def _max_seq_length(folder: Path) -> int:
    path = folder / "sentence_bert_config.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    if raw.get("do_lower_case"):
        raise ValueError(f"{path}: do_lower_case outside the tokenizer is not supported")
    return int(raw["max_seq_length"])
