"""`rubricate eval calibrate`: fit the nugget verifier's label calibration on labelled data.

Runs the verifier's choices design with calibration off (raw label probabilities) on every
selected (answer, nugget) pair, in process on the configured backend (it must score
choices: the embedded one), keeps each pair's features in a JSONL file (`--features`; an
existing file is reused and extended, so an interrupted run resumes and a refit costs
nothing), fits the multinomial model, prints its cross-validated metrics and writes the
calibration JSON (`--out`). Each answer is judged as one block, as the dev file's answers
are single paragraphs.
"""

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from rubricate.evaluation.calibration import Sample, fit
from rubricate.evaluation.nuggets import Record, json_lines, label_of, load_records, select
from rubricate.nuggets.domain.calibration import LabelCalibration, features
from rubricate.nuggets.domain.lexical import overlap


def _key(topic: str, nugget: str) -> str:
    return f"{topic}\t{nugget}"


def load_samples(path: Path) -> dict[str, Sample]:
    """Samples kept by an earlier run, by (topic, nugget) key; a bad line names itself."""
    out: dict[str, Sample] = {}
    if not path.exists():
        return out
    for raw, error in json_lines(path, "a calibration sample"):
        try:
            sample = Sample(
                topic=str(raw["topic"]),
                features=tuple(float(v) for v in raw["features"]),
                gold=label_of(raw["gold"]),
            )
            out[_key(sample.topic, str(raw["nugget"]))] = sample
        except (KeyError, TypeError, ValueError) as exc:
            raise error(exc) from exc
    return out


async def collect(
    records: list[Record], features_path: Path, *, progress: bool = True
) -> list[Sample]:
    """Raw-probability features of every pair of `records`, resuming from `features_path`."""
    from rubricate.llm.factory import build_backend
    from rubricate.llm.settings import LLMSettings
    from rubricate.nuggets.verifier.schemas import NuggetLabelsRequest
    from rubricate.nuggets.verifier.service import NuggetLabelService, NuggetTaskSettings

    known = load_samples(features_path)
    todo = [r for r in records if any(_key(r.topic_id, n.text) not in known for n in r.nuggets)]
    samples = [
        known[_key(r.topic_id, n.text)]
        for r in records
        for n in r.nuggets
        if _key(r.topic_id, n.text) in known
    ]
    if not todo:
        return samples
    llm = LLMSettings()
    backend = build_backend(llm)
    try:
        service = NuggetLabelService(
            backend=backend,
            llm=llm,
            settings=NuggetTaskSettings(design="choices", calibration="off"),
        )
        started = time.perf_counter()
        done = 0
        with features_path.open("a", encoding="utf-8") as fh:
            for rec in todo:
                nuggets = [n for n in rec.nuggets if _key(rec.topic_id, n.text) not in known]
                out = await service.label(
                    NuggetLabelsRequest(
                        question=rec.question,
                        blocks=[rec.answer],
                        nuggets=[n.text for n in nuggets],
                        label_probabilities=True,
                    )
                )
                probabilities = out.blocks[0].probabilities
                assert probabilities is not None  # the choices design always has them
                for nugget, dist in zip(nuggets, probabilities, strict=True):
                    assert dist is not None
                    sample = Sample(
                        topic=rec.topic_id,
                        features=tuple(features(dist, overlap(nugget.text, rec.answer))),
                        gold=nugget.label,
                    )
                    samples.append(sample)
                    line = {"topic": rec.topic_id, "nugget": nugget.text, "gold": nugget.label}
                    fh.write(json.dumps({**line, "features": list(sample.features)}) + "\n")
                fh.flush()
                done += len(nuggets)
                if progress:
                    elapsed = time.perf_counter() - started
                    print(
                        f"  {done} new pairs, {elapsed:.0f}s ({elapsed / done:.2f} s/pair)",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        await backend.aclose()
    return samples


async def eval_calibrate(args: argparse.Namespace) -> int:
    from rubricate.llm.settings import LLMSettings

    try:
        records = load_records(args.data)
        excluded = set(args.exclude_topics.read_text().split()) if args.exclude_topics else set()
    except (OSError, ValueError) as exc:
        print(f"rubricate eval calibrate: {exc}", file=sys.stderr)
        return 2
    chosen = select(records, limit=args.limit, per_topic=args.per_topic, seed=args.seed)
    chosen = [r for r in chosen if r.topic_id not in excluded]
    pairs = sum(len(r.nuggets) for r in chosen)
    print(f"{len(chosen)} topics, {pairs} (answer, nugget) pairs from {args.data}", flush=True)
    features_path: Path = args.features or args.out.with_suffix(".features.jsonl")
    try:
        samples = await collect(chosen, features_path)
    except ValueError as exc:
        print(f"rubricate eval calibrate: {exc}", file=sys.stderr)
        return 2
    llm = LLMSettings()
    model = llm.model or llm.embedded_model
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    calibration = fit(
        samples,
        model=model,
        fitted_on=f"{args.data.name}: {len(samples)} pairs, {len(chosen)} topics, "
        f"per-topic {args.per_topic}, seed {args.seed}, {stamp}",
        l2=args.l2,
    )
    print(format_cv(calibration))
    args.out.write_text(json.dumps(calibration.to_json(), indent=2) + "\n", encoding="utf-8")
    print(f"written to {args.out} (features in {features_path})")
    return 0


def format_cv(calibration: LabelCalibration) -> str:
    cv = calibration.cross_validated
    lines = [
        f"calibration for {calibration.model}: {int(cv['pairs'])} pairs, {int(cv['topics'])} "
        "topics, 5 folds by topic (out-of-fold figures)",
        f"{'':12}{'accuracy':>10}{'macro-F1':>10}{'supp-vs-not':>13}{'kappa':>8}",
    ]
    for name in ("raw", "calibrated"):
        lines.append(
            f"{name:12}{cv[f'{name}_accuracy']:>10.3f}{cv[f'{name}_macro_f1']:>10.3f}"
            f"{cv[f'{name}_supported_f1']:>13.3f}{cv[f'{name}_kappa']:>8.3f}"
        )
    return "\n".join(lines)
