"""`rubricate eval stagewise` end to end on the real embedded model (slow): the shortest
trajectory of the shipped set (a real RAG24 answer, topic 2024-58819), against two kinds of
damage, as one group of three rollouts."""

import json
from pathlib import Path

import pytest

from rubricate.cli import main
from rubricate.evaluation.stagewise import SHIPPED_SET, case_to_json, load_cases

pytestmark = pytest.mark.model


def test_eval_stagewise_on_the_embedded_model(tmp_path: Path) -> None:
    case = next(c for c in load_cases(SHIPPED_SET) if c.topic_id == "2024-58819")
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(case_to_json(case)) + "\n")
    out = tmp_path / "report.json"
    argv = ["eval", "stagewise", "--data", str(data), "--json", str(out)]
    argv += ["--kinds", "citations_stripped", "stage_deleted"]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["groups"] == report["groups_scored"] == 1
    assert report["failed_groups"] == []
    assert report["calls"] >= 4  # one generation call and one scoring call per rollout
    assert report["tokens"] > 1000
    detail = report["details"][0]
    assert detail["original"] is not None
    assert [v["kind"] for v in detail["variants"]] == ["citations_stripped", "stage_deleted"]
    for kind in ("citations_stripped", "stage_deleted"):
        counts = report["sensitivity"][kind]["total"]
        assert (
            counts["original_higher"]
            + counts["tie"]
            + counts["degraded_higher"]
            + counts["not_compared"]
            == 1
        )
    # a deleted stage scores 0 (RubricEM: missing stage) whatever the model says
    deleted = detail["variants"][1]
    stage = report["details"][0]["variants"][1]["detail"]
    if deleted["scores"] is not None and not deleted["answer_only"]:
        assert deleted["scores"][stage] == 0.0
