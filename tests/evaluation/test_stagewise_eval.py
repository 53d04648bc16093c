"""`rubricate eval stagewise`: the counting against hand-computed cases, and the harness end
to end through the embedded platform with a fake judge (FakeCitationJudge: the answer-stage
rubrics score 2 when the answer cites a source, 0 otherwise; every other rubric scores 1),
so the expected ranking of each kind of damage is known."""

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from rubricate.cli import main
from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.evaluation.degrade import KINDS, derive
from rubricate.evaluation.stagewise import (
    ORIGINAL_ID,
    SHIPPED_SET,
    GroupRun,
    StagewiseConfig,
    case_to_json,
    format_report,
    group_request,
    load_cases,
    run_groups,
    summarize,
    tally,
)
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.base import GenerationParams
from rubricate.llm.errors import TransportError
from rubricate.llm.settings import LLMSettings
from rubricate.testing.fake_judge import FakeJudgeBackend, shown_units

from .test_stagewise_degrade import CASE, OTHER

_RUBRIC = re.compile(r"^(\d+)\. \((plan|research|review|answer)\)", re.M)
_ANSWER_BLOCK = re.compile(r'<untrusted stage="answer"[^>]*>(.*?)</untrusted>', re.S)
DOWN = "[[judge-down]]"


def fake_citation_judge(user: str, params: GenerationParams) -> str:
    """FakeCitationJudge: a named fake, not a judge."""
    if DOWN in user:
        raise TransportError("fake judge: down for this question")
    head, _, material = user.partition("\nTrajectory:")
    block = _ANSWER_BLOCK.search(material)
    cited = block is not None and re.search(r"\[\d+\]", block.group(1)) is not None
    items = [
        {
            "index": int(i),
            "justification": "fake",
            # the answer's units shown as assertions, cited for a met answer rubric
            "evidence": shown_units(material) if stage == "answer" and cited else [],
            "score": (2 if cited else 0) if stage == "answer" else 1,
        }
        for i, stage in _RUBRIC.findall(head.partition("Rubrics:")[2])
    ]
    return json.dumps({"scores": items})


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[str]:
    backend = FakeJudgeBackend(handlers={"score_sheet": fake_citation_judge})
    platform = EmbeddedPlatform(
        data_dir=tmp_path / "platform",
        ports=dict.fromkeys(SERVICES, 0),
        llm=LLMSettings(max_retries=0, backoff_base_s=0.001, backoff_max_s=0.002),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0),
    )
    async with platform:
        yield platform.urls["gateway"]


def scores(plan: float, research: float, review: float, answer: float) -> dict[str, float]:
    return {"plan": plan, "research": research, "review": review, "answer": answer}


def test_tally_against_a_hand_computed_case() -> None:
    variants = derive(CASE, others=[OTHER], seed=0, kinds=["citations_stripped", "stage_deleted"])
    a = GroupRun(
        case=CASE,
        variants=variants,
        scores={
            ORIGINAL_ID: scores(1, 1, 0.5, 1),
            "citations_stripped": scores(1, 0.5, 0.5, 1),  # research lower, rest tie
            "stage_deleted": scores(0.5, 1, 1, 0.5),  # plan/answer lower, review higher
        },
    )
    b = GroupRun(
        case=CASE,
        variants=variants,
        scores={
            ORIGINAL_ID: scores(0, 0, 0, 0.5),
            "citations_stripped": scores(0, 0, 0, 1),  # degraded wins on answer and total
            "stage_deleted": None,  # unscored: never a ranking
        },
        unscored_stages=["review"],  # no rubric: review not compared
    )
    c = GroupRun(case=CASE, variants=variants, error="HTTP 502: judge down")
    d = GroupRun(
        case=CASE,
        variants=variants,
        scores={
            ORIGINAL_ID: scores(1, 1, 1, 1),
            "citations_stripped": scores(1, 1, 1, 0),
            "stage_deleted": scores(0, 1, 1, 1),
        },
        answer_only={"stage_deleted"},  # only its answer stage compares
    )
    t = tally([a, b, c, d])
    cs, sd, total = t["citations_stripped"], t["stage_deleted"], t["all"]
    assert list(t) == ["citations_stripped", "stage_deleted", "all"]

    def row(x: dict[str, int | float | None]) -> tuple[object, ...]:
        return (x["original_higher"], x["tie"], x["degraded_higher"], x["not_compared"])

    assert row(cs["plan"]) == (0, 3, 0, 1)
    assert row(cs["research"]) == (1, 2, 0, 1)
    assert row(cs["review"]) == (0, 2, 0, 2)
    assert row(cs["answer"]) == (1, 1, 1, 1)
    assert row(cs["total"]) == (2, 0, 0, 2)  # a: 3.5 vs 3; b: review unscored; d: 4 vs 3
    assert row(sd["plan"]) == (1, 0, 0, 3)
    assert row(sd["review"]) == (0, 0, 1, 3)
    assert row(sd["answer"]) == (1, 1, 0, 2)
    assert row(sd["total"]) == (1, 0, 0, 3)  # a: 3.5 vs 3
    assert cs["answer"]["original_higher_rate"] == pytest.approx(1 / 3)
    assert cs["total"]["tie_rate"] == 0.0
    assert sd["plan"]["compared"] == 1
    assert row(total["answer"]) == (2, 2, 1, 3)
    empty = tally([c])["citations_stripped"]["plan"]
    assert empty["compared"] == 0 and empty["original_higher_rate"] is None


def test_group_request_sends_one_group_with_nugget_rubrics() -> None:
    variants = derive(CASE, others=[OTHER], seed=0)
    body = group_request(CASE, variants, nugget_rubrics=True)
    assert [r["id"] for r in body["rollouts"]] == [ORIGINAL_ID, *KINDS]
    assert [r["title"] for r in body["persistent_rubrics"]] == ["alpha one", "gamma three"]
    assert "persistent_rubrics" not in group_request(CASE, variants, nugget_rubrics=False)


async def test_harness_end_to_end_with_the_fake_judge(gateway: str) -> None:
    cases = load_cases(SHIPPED_SET)[:3]
    down = replace(cases[0], topic_id="down", question=f"{cases[0].question} {DOWN}")
    config = StagewiseConfig(seed=1, concurrency=2)
    async with httpx.AsyncClient(base_url=gateway, timeout=60) as client:
        runs = await run_groups(client, [*cases, down], config, others=cases, progress=False)
    summary = summarize(runs, wall_s=1.0, config=config)
    assert summary["groups"] == 4 and summary["groups_scored"] == 3
    assert [f["topic_id"] for f in summary["failed_groups"]] == ["down"]
    s = summary["sensitivity"]

    def row(kind: str, column: str) -> tuple[int, int, int, int]:
        x = s[kind][column]
        return (x["original_higher"], x["tie"], x["degraded_higher"], x["not_compared"])

    # the fake only sees citations: stripping them is caught on the answer and in total
    assert row("citations_stripped", "answer") == (3, 0, 0, 1)
    assert row("citations_stripped", "total") == (3, 0, 0, 1)
    assert row("citations_stripped", "plan") == (0, 3, 0, 1)
    # a deleted stage scores 0 (missing) against 0.5: caught on that stage and in total
    assert row("stage_deleted", "total") == (3, 0, 0, 1)
    deleted = [v.detail for r in runs[:3] for v in r.variants if v.kind == "stage_deleted"]
    for stage in ("plan", "research", "review"):
        assert s["stage_deleted"][stage]["original_higher"] == deleted.count(stage)
    # the other damage keeps citations: the fake cannot see it, all ties
    for kind in ("vital_fact_removed", "wrong_fact_inserted", "answer_truncated"):
        for column in ("plan", "research", "review", "answer", "total"):
            assert row(kind, column) == (0, 3, 0, 1), (kind, column)
    assert summary["calls"] > 0 and summary["tokens"] > 0
    assert summary["details"][0]["original"] == {
        "plan": 0.5,
        "research": 0.5,
        "review": 0.5,
        "answer": 1.0,
    }
    text = format_report(summary)
    assert "citations_stripped" in text and "3/0/0 (1)" in text


async def test_cli_writes_the_json_report(gateway: str, tmp_path: Path) -> None:
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(json.dumps(case_to_json(c)) + "\n" for c in (CASE, OTHER)))
    out = tmp_path / "report.json"
    argv = ["eval", "stagewise", "--data", str(data), "--gateway", gateway, "--limit", "1"]
    argv += ["--seed", "2", "--kinds", "citations_stripped", "answer_truncated"]
    argv += ["--json", str(out)]
    assert await asyncio.to_thread(main, argv) == 0
    report = json.loads(out.read_text())
    assert report["groups"] == report["groups_scored"] == 1
    assert report["config"]["kinds"] == ["citations_stripped", "answer_truncated"]
    assert report["config"]["seed"] == 2 and report["config"]["gateway"] == gateway
    assert set(report["sensitivity"]) == {"citations_stripped", "answer_truncated", "all"}


def test_cli_reports_a_bad_file(tmp_path: Path) -> None:
    assert main(["eval", "stagewise", "--data", str(tmp_path / "none.jsonl")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"topic_id": "x"}\n')
    assert main(["eval", "stagewise", "--data", str(bad)]) == 2
