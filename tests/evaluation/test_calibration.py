"""Fitting a label calibration: recovery of a known model, class balance, folds by topic,
the resumable feature file."""

import json
import math
import random
from pathlib import Path

import pytest

from rubricate.evaluation.calibrate_run import load_samples
from rubricate.evaluation.calibration import Sample, cross_validate, fit, fit_weights, predict
from rubricate.nuggets.domain.calibration import LabelCalibration, softmax
from rubricate.nuggets.domain.rewards import LABELS
from rubricate_client.schemas.nuggets import Label

TRUE_WEIGHTS: dict[Label, tuple[float, ...]] = {
    "support": (-1.0, 2.0, 0.0, 0.0, 4.0),
    "partial_support": (0.5, 0.0, 1.5, 0.0, 1.0),
    "not_support": (0.0, 0.0, 0.0, 0.0, 0.0),
}


def synthetic(n: int, *, seed: int = 0, topics: int = 20) -> list[Sample]:
    """Samples whose gold label is drawn from the multinomial model TRUE_WEIGHTS."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        raw = [rng.random() + 1e-3 for _ in LABELS]
        total = sum(raw)
        feats = (*(math.log(r / total) for r in raw), rng.random())
        x = (1.0, *feats)
        probs = softmax(
            [sum(w * v for w, v in zip(TRUE_WEIGHTS[lab], x, strict=True)) for lab in LABELS]
        )
        gold = rng.choices(LABELS, weights=probs)[0]
        out.append(Sample(topic=f"t{i % topics}", features=feats, gold=gold))
    return out


def test_fit_recovers_the_generating_model() -> None:
    samples = synthetic(4000)
    weights = fit_weights(samples, l2=0.0, balanced=False)
    # the last row is pinned to 0, as in TRUE_WEIGHTS: the others are identifiable
    for lab in LABELS:
        assert weights[lab] == pytest.approx(TRUE_WEIGHTS[lab], abs=0.35)
    agree = sum(predict(weights, s.features) == predict(TRUE_WEIGHTS, s.features) for s in samples)
    assert agree / len(samples) > 0.95


def test_balanced_weights_raise_recall_of_a_rare_label() -> None:
    rng = random.Random(1)
    samples = []
    for i in range(600):
        gold: Label = "partial_support" if i % 10 == 0 else "not_support"
        signal = 0.6 if gold == "partial_support" else 0.4
        feats = (math.log(0.3), math.log(0.3), math.log(0.4), signal + rng.gauss(0, 0.15))
        samples.append(Sample(topic=f"t{i % 10}", features=feats, gold=gold))
    rare = [s for s in samples if s.gold == "partial_support"]

    def recall(balanced: bool) -> float:
        w = fit_weights(samples, l2=0.0, balanced=balanced)
        return sum(predict(w, s.features) == "partial_support" for s in rare) / len(rare)

    assert recall(balanced=True) > recall(balanced=False)
    assert recall(balanced=True) > 0.6


def overlap_decides(n: int, *, topics: int) -> list[Sample]:
    """Gold follows the overlap feature by thresholds; the raw probabilities are noise."""
    rng = random.Random(2)
    out = []
    for i in range(n):
        raw = [rng.random() + 1e-3 for _ in LABELS]
        ov = rng.random()
        gold: Label = "support" if ov > 0.66 else "partial_support" if ov > 0.33 else "not_support"
        feats = (*(math.log(r / sum(raw)) for r in raw), ov)
        out.append(Sample(topic=f"t{i % topics}", features=feats, gold=gold))
    return out


def test_cross_validation_holds_whole_topics_out_and_reports_the_raw_labels() -> None:
    samples = overlap_decides(500, topics=10)
    report = cross_validate(samples, folds=5, l2=0.001)
    assert report["pairs"] == 500 and report["topics"] == 10
    # raw = the most probable of the three log-probability features, counted by hand
    raw_right = sum(LABELS[max(range(3), key=lambda j: s.features[j])] == s.gold for s in samples)
    assert report["raw_accuracy"] == pytest.approx(raw_right / 500)
    # the labels depend on overlap, which the raw argmax ignores: calibration must win
    assert report["calibrated_accuracy"] > report["raw_accuracy"] + 0.3
    with pytest.raises(ValueError, match="at least 5 topics"):
        cross_validate(synthetic(50, topics=3))


def test_fit_returns_a_loadable_calibration_with_its_topics() -> None:
    cal = fit(synthetic(300, topics=6), model="qwen", fitted_on="synthetic", l2=0.1)
    again = LabelCalibration.loads(json.dumps(cal.to_json()))
    assert again == cal
    assert cal.topics == tuple(sorted(f"t{i}" for i in range(6)))
    assert 0.0 <= cal.cross_validated["calibrated_macro_f1"] <= 1.0


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        fit_weights([])


def test_feature_file_resumes_and_names_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    assert load_samples(path) == {}
    good = {"topic": "t", "nugget": "n", "gold": "support", "features": [0.0, -1.0, -2.0, 0.5]}
    path.write_text(json.dumps(good) + "\n\n")
    assert load_samples(path) == {"t\tn": Sample("t", (0.0, -1.0, -2.0, 0.5), "support")}
    path.write_text(json.dumps(good) + "\n" + '{"topic": "t"}\n')
    with pytest.raises(ValueError, match=r"f.jsonl:2: not a calibration sample"):
        load_samples(path)


@pytest.mark.parametrize("missing", ["data", "exclude_topics"])
def test_calibrate_command_reports_a_missing_file_without_loading_a_model(
    tmp_path: Path, missing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse
    import asyncio

    from rubricate.evaluation.calibrate_run import eval_calibrate

    data = tmp_path / "dev.jsonl"
    data.write_text(json.dumps({"topic_id": "t", "question": "q", "answer": "a", "nuggets": []}))
    args = argparse.Namespace(
        data=data, exclude_topics=None, limit=None, per_topic=None, seed=0,
        out=tmp_path / "cal.json", features=None, l2=0.01,
    )  # fmt: skip
    setattr(args, missing, tmp_path / "nope.txt")
    assert asyncio.run(eval_calibrate(args)) == 2
    assert "nope.txt" in capsys.readouterr().err
    assert not (tmp_path / "cal.json").exists()
