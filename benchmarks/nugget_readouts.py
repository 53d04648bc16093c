"""Other readouts of the embedded verifier model: do they add to the shipped calibration?

Prints figures; asserts nothing. On the pairs of the shipped calibration's features file
(`rubricate/nuggets/verifier/calibrations/qwen2.5-coder-1.5b.features.jsonl`: 875 pairs of 146
RAG24 dev topics, with the three label log-probabilities of the `choices` design and the
word overlap), it computes extra inputs per pair with the embedded model and
cross-validates the calibration's multinomial model with each added (5 folds of whole
topics, the same folds, fit and metrics as `rubricate eval calibrate`):

- `window`: the label log-probabilities of the nugget judged against its best-matching
  window of three sentences only (the window around the sentence closest to the nugget by
  all-MiniLM-L6-v2 cosine) instead of the whole answer: block-level judging at sentence
  granularity, pooled with the whole-answer judgment by the fitted model (and by `max`).
- `pmi`: how much the passage raises the model's likelihood of the nugget's own words,
  per token: log p(nugget | question, passage) - log p(nugget | question), both read from
  the verification prompt (the second with an empty passage).
- `probe`: the model's last hidden state at the decision position (1536 numbers for the
  1.5B model), reduced to 32 principal components fitted on each training fold: a linear
  probe, which can use everything the model represents there, not only three logits.
- `embedding`: the cosine of nugget and closest answer sentence and of nugget and whole
  answer (all-MiniLM-L6-v2).

Per-pair values are cached (JSON lines under `--cache`), so a rerun only prints. Needs
`../shared/data/rag24-nuggets-dev.jsonl`; about 45 minutes of model time on 2 idle cores
for all four readouts. The llama.cpp calls use llama-cpp-python's low-level batch (logits
at several positions, the hidden state of one position): benchmark code, not the service's
path.

    python benchmarks/nugget_readouts.py [--pairs 875] [--readouts window pmi probe embedding]
        [--cache .cache/nugget-readouts]
"""

import argparse
import json
import math
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubricate.evaluation import metrics
from rubricate.evaluation.calibration import SUPPORTED_GROUPS, Sample, fit_weights, predict
from rubricate.nuggets.domain.calibration import features as calibration_features
from rubricate.nuggets.domain.rewards import LABELS
from rubricate_client.schemas.nuggets import Label

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "rag24-nuggets-dev.jsonl"
FEATURES_FILE = (
    ROOT / "services/rubricate/nuggets/verifier/calibrations/qwen2.5-coder-1.5b.features.jsonl"
)
READOUTS = ("window", "pmi", "probe", "embedding")
REPLY_PREFIX = '["'
CHOICES = ("support", "partial", "not")  # the labels' first tokens, as the verifier scores them
FOLDS, SEED, PROBE_DIMS = 5, 0, 32


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()] or [text]


class Model:
    """The embedded GGUF model through llama-cpp-python, KV cache reused across prompts."""

    def __init__(self) -> None:
        import llama_cpp
        from llama_cpp.llama import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        from rubricate.llm.model_files import resolve_model_path
        from rubricate.llm.settings import LLMSettings

        self.lib = llama_cpp
        self.llm = Llama(
            model_path=str(resolve_model_path(LLMSettings())),
            n_ctx=4096,
            n_threads=2,
            verbose=False,
        )

        def text(token: int) -> str:
            return self.llm.detokenize([token], special=True).decode("utf-8", "replace")

        self.formatter = Jinja2ChatFormatter(
            template=self.llm.metadata["tokenizer.chat_template"],
            eos_token=text(self.llm.token_eos()),
            bos_token=text(self.llm.token_bos()),
        )
        base = len(self.tokens(REPLY_PREFIX, bos=False))
        self.first = [self.tokens(REPLY_PREFIX + c, bos=False)[base] for c in CHOICES]

    def tokens(self, text: str, *, bos: bool = True) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=bos))

    def prompt(self, question: str, block: str, nugget: str) -> str:
        from rubricate.llm.openai_format import chat_messages
        from rubricate.nuggets.prompts import labels as nugget_labels

        messages = nugget_labels.build_messages(
            question=question,
            block=block,
            block_index=0,
            n_blocks=1,
            nuggets=[nugget],
            mode="long",
            fmt="json",
        )
        return str(self.formatter(messages=chat_messages(messages)).prompt)

    def _reuse(self, tokens: Sequence[int], upto: int) -> None:
        """Keep the cached prefix shared with `tokens`, then evaluate up to `upto`."""
        llm, cached = self.llm, 0
        limit = min(llm.n_tokens, upto)
        while cached < limit and llm.input_ids[cached] == tokens[cached]:
            cached += 1
        llm.n_tokens = cached
        if upto > cached:
            llm.eval(list(tokens[cached:upto]))

    def _decode(self, batch: Sequence[int], *, all_logits: bool) -> None:
        llm = self.llm
        llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
        llm._batch.set_batch(batch=list(batch), n_past=llm.n_tokens, logits_all=all_logits)
        llm._ctx.decode(llm._batch)
        llm.input_ids[llm.n_tokens : llm.n_tokens + len(batch)] = batch
        llm.n_tokens += len(batch)

    def _log_softmax(self, i: int) -> Any:
        pointer = self.lib.llama_get_logits_ith(self.llm.ctx, i)
        logits = np.ctypeslib.as_array(pointer, shape=(self.llm.n_vocab(),)).astype(np.float64)
        top = float(logits.max())
        return logits - (top + math.log(float(np.exp(logits - top).sum())))

    def labels(self, prompt: str, *, hidden: bool = False) -> tuple[list[float], list[float]]:
        """Log p of the three labels' first tokens after the reply prefix; the last hidden
        state there too when `hidden`."""
        tokens = self.tokens(prompt + REPLY_PREFIX)
        self._reuse(tokens, len(tokens) - 1)
        if hidden:
            self.lib.llama_set_embeddings(self.llm.ctx, True)
        try:
            self._decode(tokens[-1:], all_logits=True)
            logp = self._log_softmax(-1)
            state: list[float] = []
            if hidden:
                pointer = self.lib.llama_get_embeddings_ith(self.llm.ctx, -1)
                vector = np.ctypeslib.as_array(pointer, shape=(self.llm.n_embd(),))
                state = [round(float(v), 4) for v in vector]
        finally:
            if hidden:
                self.lib.llama_set_embeddings(self.llm.ctx, False)
        return [float(logp[t]) for t in self.first], state

    def span_logp(self, prompt: str, span: str) -> tuple[float, int]:
        """Summed log p of the tokens of `span` where it stands in `prompt`, and their count."""
        at = prompt.rindex(span)
        before = self.tokens(prompt[:at])
        full = self.tokens(prompt)
        through = self.tokens(prompt[: at + len(span)])
        start = 0
        while start < min(len(before), len(full)) and before[start] == full[start]:
            start += 1
        end = len(through)
        while end > start and (end > len(full) or full[end - 1] != through[end - 1]):
            end -= 1
        start = max(start, 1)
        self._reuse(full, start - 1)
        segment = full[start - 1 : end]
        self._decode(segment, all_logits=True)
        total = sum(float(self._log_softmax(i)[segment[i + 1]]) for i in range(len(segment) - 1))
        return total, max(1, len(segment) - 1)


def compute(
    readouts: Sequence[str], pairs: list[dict[str, Any]], records: dict[str, Any], cache: Path
) -> dict[str, dict[str, Any]]:
    """Per-pair values of each readout, from the cache or computed (then cached)."""
    from rubricate.common.embeddings import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    model: Model | None = None
    values: dict[str, dict[str, Any]] = {}
    cache.mkdir(parents=True, exist_ok=True)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for pair in pairs:
        by_topic.setdefault(pair["topic"], []).append(pair)
    for readout in readouts:
        path = cache / f"{readout}.jsonl"
        done: dict[str, Any] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                done[_key(row["topic"], row["nugget"])] = row["value"]
        todo = {_key(p["topic"], p["nugget"]) for p in pairs} - set(done)
        started, n = time.perf_counter(), 0
        with path.open("a", encoding="utf-8") as out:
            for topic, group in by_topic.items():
                group = [p for p in group if _key(topic, p["nugget"]) in todo]
                if not group:
                    continue
                if readout != "embedding" and model is None:
                    model = Model()
                record = records[topic]
                answer_sentences = sentences(record["answer"])
                embedded = readout in ("window", "embedding")  # the others need no embeddings
                if embedded:
                    vectors = np.array(embedder.embed(answer_sentences))
                    whole = np.array(embedder.embed([record["answer"]]))[0]
                if readout == "pmi":
                    assert model is not None
                    prior = {
                        p["nugget"]: model.span_logp(
                            model.prompt(record["question"], "", p["nugget"]), p["nugget"]
                        )
                        for p in group
                    }
                for pair in group:
                    nugget = pair["nugget"]
                    if embedded:
                        nugget_vector = np.array(embedder.embed([nugget]))[0]
                        sims = vectors @ nugget_vector
                    value: Any
                    if readout == "embedding":
                        value = [float(sims.max()), float(whole @ nugget_vector)]
                    elif readout == "window":
                        assert model is not None
                        best = int(sims.argmax())
                        window = " ".join(answer_sentences[max(0, best - 1) : best + 2])
                        value = model.labels(model.prompt(record["question"], window, nugget))[0]
                    elif readout == "pmi":
                        assert model is not None
                        cond, count = model.span_logp(
                            model.prompt(record["question"], record["answer"], nugget), nugget
                        )
                        value = (cond - prior[nugget][0]) / count
                    else:  # probe
                        assert model is not None
                        prompt = model.prompt(record["question"], record["answer"], nugget)
                        value = model.labels(prompt, hidden=True)[1]
                    done[_key(topic, nugget)] = value
                    out.write(json.dumps({"topic": topic, "nugget": nugget, "value": value}) + "\n")
                    out.flush()
                    n += 1
                    if n % 50 == 0:
                        took = time.perf_counter() - started
                        print(f"  {readout}: {n}/{len(todo)} pairs, {took:.0f} s", file=sys.stderr)
        values[readout] = done
    return values


def _key(topic: str, nugget: str) -> str:
    return f"{topic}\t{nugget}"


def _normalised(logp: Sequence[float]) -> list[float]:
    return calibration_features(
        {lab: math.exp(v) for lab, v in zip(LABELS, logp, strict=True)}, 0.0
    )[:3]


def cross_validated(
    pairs: Sequence[dict[str, Any]],
    inputs: Callable[[dict[str, Any]], list[float]],
    *,
    reduce: Callable[[Any, Any], tuple[Any, Any]] | None = None,
) -> dict[str, float]:
    """Out-of-fold metrics of the calibration's model on `inputs(pair)`, the folds of
    `rubricate.evaluation.calibration.cross_validate`. `reduce(train, test)` transforms the
    input matrices per fold (fitted on the training fold only)."""
    topics = sorted({p["topic"] for p in pairs})
    random.Random(SEED).shuffle(topics)
    fold_of = {t: i % FOLDS for i, t in enumerate(topics)}
    x = np.array([inputs(p) for p in pairs], dtype=np.float64)
    gold: list[Label] = []
    pred: list[Label] = []
    for f in range(FOLDS):
        train = np.array([fold_of[p["topic"]] != f for p in pairs])
        xa, xb = x[train], x[~train]
        if reduce is not None:
            xa, xb = reduce(xa, xb)
        train_pairs = [p for p, t in zip(pairs, train, strict=True) if t]
        test_pairs = [p for p, t in zip(pairs, train, strict=True) if not t]
        weights = fit_weights(
            [
                Sample(p["topic"], tuple(row), p["gold"])
                for p, row in zip(train_pairs, xa, strict=True)
            ]
        )
        for p, row in zip(test_pairs, xb, strict=True):
            gold.append(p["gold"])
            pred.append(predict(weights, [float(v) for v in row]))
    matrix = metrics.confusion(gold, pred, LABELS)
    return {
        "accuracy": metrics.accuracy(matrix),
        "macro_f1": metrics.macro_f1(matrix),
        "supported_f1": metrics.macro_f1(metrics.collapse(matrix, SUPPORTED_GROUPS)),
        "kappa": metrics.cohen_kappa(matrix),
    }


def probe_reduce(base_width: int) -> Callable[[Any, Any], tuple[Any, Any]]:
    """Keep the first `base_width` columns; project the rest on the training fold's top
    principal components (standardised first)."""

    def reduce(train: Any, test: Any) -> tuple[Any, Any]:
        h_train, h_test = train[:, base_width:], test[:, base_width:]
        mean, std = h_train.mean(axis=0), h_train.std(axis=0) + 1e-6
        z_train, z_test = (h_train - mean) / std, (h_test - mean) / std
        _, _, vt = np.linalg.svd(z_train, full_matrices=False)
        components = vt[:PROBE_DIMS].T
        scale = (z_train @ components).std(axis=0) + 1e-6
        return (
            np.hstack([train[:, :base_width], z_train @ components / scale]),
            np.hstack([test[:, :base_width], z_test @ components / scale]),
        )

    return reduce


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--pairs", type=int, default=875, help="the first N pairs of the file")
    parser.add_argument("--readouts", nargs="+", choices=READOUTS, default=list(READOUTS))
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "nugget-readouts")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"error: {args.data} not found (the RAG24 dev file, see ../shared/data)")
        return 2
    records = {}
    for line in args.data.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        records[record["topic_id"]] = record
    pairs = [json.loads(line) for line in FEATURES_FILE.read_text(encoding="utf-8").splitlines()][
        : args.pairs
    ]
    values = compute(args.readouts, pairs, records, args.cache)

    def v(readout: str, p: dict[str, Any]) -> Any:
        return values[readout][_key(p["topic"], p["nugget"])]

    rows: list[tuple[str, dict[str, float]]] = [
        ("shipped: 3 label log-probs + overlap", cross_validated(pairs, lambda p: p["features"]))
    ]
    if "window" in values:
        rows.append(
            (
                "window only (+ overlap)",
                cross_validated(pairs, lambda p: [*_normalised(v("window", p)), p["features"][3]]),
            )
        )
        rows.append(
            (
                "+ window",
                cross_validated(pairs, lambda p: [*p["features"], *_normalised(v("window", p))]),
            )
        )
        rows.append(
            (
                "max-pool(whole, window) + overlap",
                cross_validated(
                    pairs,
                    lambda p: [
                        *_normalised(
                            [
                                max(a, b)
                                for a, b in zip(
                                    p["features"][:3], _normalised(v("window", p)), strict=True
                                )
                            ]
                        ),
                        p["features"][3],
                    ],
                ),
            )
        )
    if "pmi" in values:
        rows.append(
            ("+ pmi per token", cross_validated(pairs, lambda p: [*p["features"], v("pmi", p)]))
        )
    if "embedding" in values:
        rows.append(
            (
                "+ embedding cosines",
                cross_validated(pairs, lambda p: [*p["features"], *v("embedding", p)]),
            )
        )
    if "probe" in values:
        rows.append(
            (
                f"+ hidden state (probe, {PROBE_DIMS} PCs)",
                cross_validated(
                    pairs, lambda p: [*p["features"], *v("probe", p)], reduce=probe_reduce(4)
                ),
            )
        )
    print(f"{len(pairs)} pairs, {len({p['topic'] for p in pairs})} topics, {FOLDS} topic folds")
    print(f"{'inputs':42s} {'acc':>6s} {'mF1(3)':>7s} {'sup-vs-not':>10s} {'kappa':>6s}")
    for name, m in rows:
        print(
            f"{name:42s} {m['accuracy']:6.3f} {m['macro_f1']:7.3f} "
            f"{m['supported_f1']:10.3f} {m['kappa']:6.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
