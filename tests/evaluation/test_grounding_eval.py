"""`rubricate eval grounding`: the grounded-support rule's cost on the RAG24 dev file, from
the stored verifier features (no model). GitHub issue 25: the fall is at most 0.01."""

import argparse
from pathlib import Path

import pytest

from rubricate.evaluation import grounding as g
from rubricate.evaluation.cli import register
from rubricate.nuggets.domain.grounding import CALIBRATED, GroundingRule
from rubricate.nuggets.verifier.service import shipped_calibration

RAG24 = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "rag24-nuggets-dev.jsonl"

needs_data = pytest.mark.skipif(not RAG24.exists(), reason="the RAG24 dev file is not here")


@pytest.fixture(scope="module")
def pairs() -> list[g.Pair]:
    return g.pairs(RAG24, g.SHIPPED_FEATURES)


@needs_data
def test_before_is_the_shipped_calibrations_cross_validated_figures(pairs: list[g.Pair]) -> None:
    calibration = shipped_calibration("qwen2.5-coder-1.5b")
    assert calibration is not None
    report = g.evaluate(pairs, CALIBRATED)
    cv = calibration.cross_validated
    assert len(pairs) == int(cv["pairs"])
    assert report["before"]["macro_f1"] == pytest.approx(cv["calibrated_macro_f1"])
    assert report["before"]["supported_f1"] == pytest.approx(cv["calibrated_supported_f1"])


@needs_data
def test_the_shipped_rule_costs_at_most_one_hundredth(pairs: list[g.Pair]) -> None:
    report = g.evaluate(pairs, CALIBRATED)
    assert report["fall_macro_f1"] <= 0.01
    assert report["fall_supported_f1"] <= 0.01
    assert report["lowered"] > 0  # it does something on real answers
    # a much stricter rule is measurably worse: the measurement can fail
    strict = g.evaluate(pairs, GroundingRule(support_min=1.0, partial_min=0.5))
    assert strict["fall_macro_f1"] > 0.01


def test_choose_picks_the_strictest_rule_within_the_fall() -> None:
    def row(s: float, p: float, fall: float) -> dict[str, object]:
        rule = {"support_min": s, "partial_min": p, "numbers": True}
        return {"rule": rule, "fall_macro_f1": fall, "fall_supported_f1": 0.0}

    rows = [row(0.5, 0.2, 0.0), row(0.7, 0.3, 0.009), row(0.9, 0.3, 0.05)]
    chosen = g.choose(rows, max_fall=0.01)
    assert chosen is not None and chosen["rule"]["support_min"] == 0.7
    assert g.choose([row(0.9, 0.3, 0.05)], max_fall=0.01) is None


@needs_data
def test_cli(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["eval", "grounding", "--data", str(RAG24)])
    assert args.func(args) == 0
