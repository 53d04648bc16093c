"""The `rubricate eval nuggets` harness against the embedded platform with a fake labeller
(FakeNuggetLabeller: word overlap), so the expected agreement is known."""

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from rubricate.cli import main
from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.evaluation.nuggets import (
    Record,
    RefNugget,
    RunConfig,
    load_records,
    run_records,
    select,
    summarize,
)
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.settings import LLMSettings
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_nuggets import FakeNuggetLabeller

RECORDS = [
    {
        "topic_id": "t1",
        "question": "q1",
        "answer": "Alpha beta gamma. Delta epsilon.",
        "nuggets": [
            {"text": "alpha beta", "importance": "vital", "label": "support"},
            {"text": "delta zeta", "importance": "okay", "label": "partial_support"},
            {"text": "omega", "importance": "unknown", "label": "not_support"},
        ],
    },
    {
        "topic_id": "t2",
        "question": "q2",
        "answer": "Red green blue.",
        "nuggets": [
            {"text": "green blue", "importance": "vital", "label": "support"},
            # the fake says partial_support here: one disagreement
            {"text": "red yellow", "importance": "vital", "label": "not_support"},
        ],
    },
    {
        "topic_id": "t3",
        "question": "q3",
        "answer": "[[verifier-down]] anything",
        "nuggets": [{"text": "anything", "importance": "vital", "label": "support"}],
    },
]


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "nuggets.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    return path


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[str]:
    backend = FakeJudgeBackend(handlers={"nugget_labels": FakeNuggetLabeller()})
    platform = EmbeddedPlatform(
        data_dir=tmp_path / "platform",
        ports=dict.fromkeys(SERVICES, 0),
        llm=LLMSettings(max_retries=0, backoff_base_s=0.001, backoff_max_s=0.002),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0),
    )
    async with platform:
        yield platform.urls["gateway"]


def test_load_records_and_reject_bad_lines(data_file: Path, tmp_path: Path) -> None:
    records = load_records(data_file)
    assert [r.topic_id for r in records] == ["t1", "t2", "t3"]
    assert records[0].nuggets[1] == RefNugget("delta zeta", "okay", "partial_support")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(RECORDS[0]) + "\n" + '{"topic_id": "x", "nuggets": []}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        load_records(bad)


def test_select_is_seeded_and_honours_limits() -> None:
    records = [
        Record(f"t{i}", "q", "a", tuple(RefNugget(f"n{j}", "vital", "support") for j in range(5)))
        for i in range(10)
    ]
    a = select(records, limit=12, per_topic=3, seed=7)
    assert sum(len(r.nuggets) for r in a) == 12
    assert all(len(r.nuggets) <= 3 for r in a)
    assert a == select(records, limit=12, per_topic=3, seed=7)
    assert a != select(records, limit=12, per_topic=3, seed=8)
    assert sum(len(r.nuggets) for r in select(records, limit=None, per_topic=None, seed=0)) == 50


async def test_harness_scores_agreement_and_counts_failures_apart(
    gateway: str, data_file: Path
) -> None:
    records = load_records(data_file)
    config = RunConfig(batch_size=1, concurrency=2)
    async with httpx.AsyncClient(base_url=gateway, timeout=30) as client:
        runs = await run_records(client, records, config, progress=False)
    summary = summarize(runs, wall_s=2.0, config=config)
    assert summary["pairs"] == 6 and summary["pairs_judged"] == 5
    assert [f["topic_id"] for f in summary["failed_records"]] == ["t3"]
    assert summary["accuracy"] == pytest.approx(4 / 5)
    assert summary["confusion"]["matrix"] == [[2, 0, 0], [0, 1, 0], [0, 1, 1]]
    # S: F1 1; P: P=1/2 R=1 -> 2/3; N: P=1 R=1/2 -> 2/3
    assert summary["macro_f1"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
    assert summary["supported_vs_not"]["confusion"]["matrix"] == [[3, 0], [1, 1]]
    assert summary["seconds_per_nugget"] == pytest.approx(2.0 / 6)
    # 5 labelling calls, and each record's answer read as units once (3: the failed record's
    # reading came before its labelling call failed)
    assert summary["calls"] == 5 + 3 and summary["tokens_per_nugget"] > 0
    low, high = summary["bootstrap_95"]["accuracy"]
    assert 0.0 <= low <= high <= 1.0


async def test_cli_writes_the_json_report(gateway: str, data_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    argv = ["eval", "nuggets", "--data", str(data_file), "--gateway", gateway]
    argv += ["--limit", "5", "--seed", "3", "--json", str(out)]
    code = await asyncio.to_thread(main, argv)
    assert code == 0
    report = json.loads(out.read_text())
    assert report["pairs"] == 5
    assert report["config"]["gateway"] == gateway and report["config"]["seed"] == 3
    assert {"accuracy", "macro_f1", "kappa", "per_label", "confusion", "bootstrap_95"} <= set(
        report
    )


def test_cli_reports_a_missing_file(tmp_path: Path) -> None:
    assert main(["eval", "nuggets", "--data", str(tmp_path / "none.jsonl")]) == 2


def test_lexical_calibration_separates_an_easy_set() -> None:
    from rubricate.evaluation.lexical import calibrate, lexical_predictions

    records = [
        Record(
            "t",
            "q",
            "alpha beta gamma delta",
            (
                RefNugget("alpha beta gamma", "vital", "support"),
                RefNugget("alpha beta omega psi", "vital", "partial_support"),
                RefNugget("omega psi chi", "vital", "not_support"),
            ),
        )
    ]
    th = calibrate(records)
    assert lexical_predictions(records, th) == [["support", "partial_support", "not_support"]]
