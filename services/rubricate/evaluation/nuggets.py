"""`rubricate eval nuggets`: the platform's nugget verification against reference labels.

Input: JSON lines of `{topic_id, question, answer, nuggets: [{text, importance, label}]}`
(the format of the RAG24 dev file). Each selected record is one `POST /v1/nuggets/verify`
(long mode) on a running gateway, or on an embedded platform started for the run; every
(answer, nugget) pair's max-pooled label is compared with the reference label.

Reported: accuracy, macro-F1 over the three labels, macro-F1 of supported-vs-not (support
and partial_support together against not_support), Cohen's kappa, per-label precision /
recall / F1, the confusion matrix, a 95% bootstrap interval by topic, seconds and tokens
per nugget. Records whose request failed are counted and left out of the metrics (a
failure is not a `not_support`).
"""

import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from rubricate.evaluation import metrics
from rubricate.evaluation.target import PostedRun, post_all
from rubricate.nuggets.domain.rewards import LABELS
from rubricate_client.endpoints import NUGGETS_VERIFY
from rubricate_client.schemas.nuggets import Label

SUPPORTED_GROUPS = ((0, 1), (2,))
"""LABELS order (support, partial_support, not_support) collapsed to supported / not."""


@dataclass(frozen=True)
class RefNugget:
    text: str
    importance: str
    label: Label


@dataclass(frozen=True)
class Record:
    topic_id: str
    question: str
    answer: str
    nuggets: tuple[RefNugget, ...]


def json_lines(path: Path, what: str) -> Iterator[tuple[Any, Callable[[Exception], ValueError]]]:
    """Each non-blank line of a JSON-lines file, decoded, with a function that turns an
    error in reading it into a ValueError naming the file, the line and `what` it is not."""
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue

            def error(exc: Exception, n: int = n) -> ValueError:
                return ValueError(f"{path}:{n}: not {what} ({exc})")

            try:
                raw = json.loads(line)
            except ValueError as exc:
                raise error(exc) from exc
            yield raw, error


def load_records(path: Path) -> list[Record]:
    """Records of a JSON-lines file; an invalid line raises ValueError naming it."""
    out: list[Record] = []
    for raw, error in json_lines(path, "a labelled nugget record"):
        try:
            nuggets = tuple(
                RefNugget(
                    text=str(x["text"]),
                    importance=str(x.get("importance", "vital")),
                    label=label_of(x["label"]),
                )
                for x in raw["nuggets"]
            )
            out.append(
                Record(
                    topic_id=str(raw["topic_id"]),
                    question=str(raw["question"]),
                    answer=str(raw["answer"]),
                    nuggets=nuggets,
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise error(exc) from exc
    return out


def label_of(value: Any) -> Label:
    """`value` as a Label; ValueError for anything else."""
    for label in LABELS:
        if value == label:
            return label
    raise ValueError(f"unknown label {value!r}")


def select(
    records: Sequence[Record], *, limit: int | None, per_topic: int | None, seed: int
) -> list[Record]:
    """A seeded sample: topics in random order, at most `per_topic` random nuggets each,
    until `limit` pairs."""
    rng = random.Random(seed)
    order = list(records)
    rng.shuffle(order)
    out: list[Record] = []
    pairs = 0
    for rec in order:
        if limit is not None and pairs >= limit:
            break
        nuggets = list(rec.nuggets)
        if per_topic is not None and len(nuggets) > per_topic:
            nuggets = rng.sample(nuggets, per_topic)
        if limit is not None:
            nuggets = nuggets[: limit - pairs]
        pairs += len(nuggets)
        out.append(Record(rec.topic_id, rec.question, rec.answer, tuple(nuggets)))
    return out


@dataclass
class RecordRun(PostedRun):
    record: Record
    predicted: list[Label] | None = None
    probabilities: list[dict[str, float] | None] | None = None


@dataclass
class RunConfig:
    batch_size: int | None = None
    label_probabilities: bool = False
    concurrency: int = 1
    timeout_s: float = 3600.0
    extra: dict[str, Any] = field(default_factory=dict)
    """Echoed into the report (backend, model, settings) so runs can be compared."""


async def run_records(
    client: httpx.AsyncClient,
    records: Sequence[Record],
    config: RunConfig,
    *,
    progress: bool = True,
) -> list[RecordRun]:
    """Each record's nuggets verified in one request (`verify_request`), the predicted
    labels (and probabilities) read from the response."""

    def done(n: int, run: RecordRun) -> None:
        what = f"{run.record.topic_id} {len(run.record.nuggets)} nuggets"
        print(run.progress_line(n, len(records), what), flush=True)

    return await post_all(
        client,
        NUGGETS_VERIFY,
        [(RecordRun(record=rec), verify_request(rec, config)) for rec in records],
        concurrency=config.concurrency,
        read=_read_response,
        done=done if progress else None,
    )


def verify_request(rec: Record, config: RunConfig) -> dict[str, Any]:
    body: dict[str, Any] = {
        "question": rec.question,
        "answer": rec.answer,
        "nuggets": [
            {"text": n.text, "importance": "vital" if n.importance == "vital" else "okay"}
            for n in rec.nuggets
        ],
        "label_probabilities": config.label_probabilities,
    }
    if config.batch_size is not None:
        body["batch_size"] = config.batch_size
    return body


def _read_response(run: RecordRun, data: Mapping[str, Any]) -> None:
    run.predicted = [n["label"] for n in data["nuggets"]]
    run.probabilities = [n.get("probabilities") for n in data["nuggets"]]


def summarize(runs: Sequence[RecordRun], *, wall_s: float, config: RunConfig) -> dict[str, Any]:
    ok = [r for r in runs if r.predicted is not None]
    gold: list[Label] = []
    pred: list[Label] = []
    by_topic: list[list[tuple[Label, Label]]] = []
    for r in ok:
        assert r.predicted is not None
        pairs = [(n.label, p) for n, p in zip(r.record.nuggets, r.predicted, strict=True)]
        by_topic.append(pairs)
        gold.extend(g for g, _ in pairs)
        pred.extend(p for _, p in pairs)
    three = metrics.report(gold, pred, LABELS)
    matrix = metrics.confusion(gold, pred, LABELS)
    binary = metrics.collapse(matrix, SUPPORTED_GROUPS)
    pairs_total = sum(len(r.record.nuggets) for r in runs)
    judged = len(gold)
    macro = metrics.bootstrap_by_group(by_topic, LABELS, metrics.macro_f1)
    acc = metrics.bootstrap_by_group(by_topic, LABELS, metrics.accuracy)
    supported = metrics.bootstrap_by_group(
        by_topic, LABELS, lambda m: metrics.macro_f1(metrics.collapse(m, SUPPORTED_GROUPS))
    )
    return {
        "config": {
            "batch_size": config.batch_size,
            "label_probabilities": config.label_probabilities,
            "concurrency": config.concurrency,
            **config.extra,
        },
        "topics": len(runs),
        "pairs": pairs_total,
        "pairs_judged": judged,
        "failed_records": [
            {"topic_id": r.record.topic_id, "error": r.error} for r in runs if r.error
        ],
        **{k: three[k] for k in ("accuracy", "macro_f1", "kappa", "per_label", "confusion")},
        "supported_vs_not": {
            "macro_f1": metrics.macro_f1(binary),
            "accuracy": metrics.accuracy(binary),
            "confusion": {"labels": ["supported", "not_supported"], "matrix": binary},
        },
        "bootstrap_95": {
            "by": "topic",
            "accuracy": [acc.low, acc.high],
            "macro_f1": [macro.low, macro.high],
            "supported_vs_not_macro_f1": [supported.low, supported.high],
        },
        "gold_distribution": {label: gold.count(label) for label in LABELS},
        "predicted_distribution": {label: pred.count(label) for label in LABELS},
        "wall_s": wall_s,
        "seconds_per_nugget": wall_s / pairs_total if pairs_total else 0.0,
        "tokens_per_nugget": sum(r.tokens for r in runs) / pairs_total if pairs_total else 0.0,
        "calls": sum(r.calls for r in runs),
        "predictions": [
            {
                "topic_id": r.record.topic_id,
                "nuggets": [
                    {"text": n.text, "gold": n.label, "predicted": p, "probabilities": q}
                    for n, p, q in zip(
                        r.record.nuggets,
                        _or_nones(r.predicted, len(r.record.nuggets)),
                        r.probabilities or [None] * len(r.record.nuggets),
                        strict=True,
                    )
                ],
            }
            for r in runs
        ],
    }


def _or_nones(values: Sequence[Label] | None, n: int) -> list[Label | None]:
    return [None] * n if values is None else list(values)


def format_report(summary: dict[str, Any]) -> str:
    s = summary
    lines = [
        f"topics {s['topics']}  pairs {s['pairs']}  judged {s['pairs_judged']}  "
        f"failed records {len(s['failed_records'])}",
        f"accuracy            {s['accuracy']:.3f}   95% CI {_ci(s['bootstrap_95']['accuracy'])}",
        f"macro-F1 (3 labels) {s['macro_f1']:.3f}   95% CI {_ci(s['bootstrap_95']['macro_f1'])}",
        f"macro-F1 supported-vs-not {s['supported_vs_not']['macro_f1']:.3f}   95% CI "
        f"{_ci(s['bootstrap_95']['supported_vs_not_macro_f1'])}",
        f"Cohen's kappa       {s['kappa']:.3f}",
        "per label:            precision recall  F1     gold",
    ]
    for label, sc in s["per_label"].items():
        lines.append(
            f"  {label:<18} {sc['precision']:>9.3f} {sc['recall']:>6.3f} {sc['f1']:>6.3f} "
            f"{sc['support']:>6}"
        )
    lines.append("confusion (rows gold, columns predicted):")
    labels = s["confusion"]["labels"]
    lines.append(" " * 18 + "".join(f"{x[:12]:>14}" for x in labels))
    for label, row in zip(labels, s["confusion"]["matrix"], strict=True):
        lines.append(f"  {label:<16}" + "".join(f"{v:>14}" for v in row))
    lines.append(
        f"seconds per nugget {s['seconds_per_nugget']:.2f}  tokens per nugget "
        f"{s['tokens_per_nugget']:.0f}  calls {s['calls']}  wall {s['wall_s']:.1f} s"
    )
    return "\n".join(lines)


def _ci(pair: Sequence[float]) -> str:
    return f"[{pair[0]:.3f}, {pair[1]:.3f}]"
