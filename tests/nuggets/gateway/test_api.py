"""`/v1/nuggets/verify` and `/v1/nuggets/verify-batch` over HTTP through the embedded
platform, with a fake labeller behind the verifier (FakeNuggetLabeller: word overlap)."""

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.settings import GatewaySettings
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_nuggets import FakeNuggetLabeller
from tests.support.gateway import Running, fast_llm

QUESTION = "is pew research trustworthy"
ANSWER = (
    "Pew Research Center is a nonpartisan fact tank founded in 2004.\n\n"
    "It conducts public opinion polling and demographic research.\n\n"
    "Critics rarely question its methods."
)
NUGGETS = [
    {"text": "nonpartisan fact tank", "importance": "vital"},  # block 0 support
    {"text": "founded 2004 Washington", "importance": "vital"},  # block 0 partial
    {"text": "public opinion polling", "importance": "okay"},  # block 1 support
    {"text": "funded by advertisers", "importance": "okay"},  # nowhere
]


@dataclass
class Nuggets:
    client: httpx.AsyncClient
    backend: FakeJudgeBackend
    labeller: FakeNuggetLabeller
    verifier_url: str


@pytest.fixture
def labeller() -> FakeNuggetLabeller:
    return FakeNuggetLabeller()


@pytest.fixture
async def nuggets(tmp_path: Path, labeller: FakeNuggetLabeller) -> AsyncIterator[Nuggets]:
    backend = FakeJudgeBackend(handlers={"nugget_labels": labeller})
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0),
    )
    async with platform, httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=30) as c:
        yield Nuggets(c, backend, labeller, platform.urls["verifier"])


def body(**kw: Any) -> dict[str, Any]:
    return {"question": QUESTION, "answer": ANSWER, "nuggets": NUGGETS, **kw}


def nugget_calls(backend: FakeJudgeBackend) -> int:
    return sum(1 for name, _ in backend.calls if name == "nugget_labels")


def unit_calls(backend: FakeJudgeBackend) -> int:
    """Calls that read a block as assertion units (one per block with an undecided unit)."""
    return sum(1 for name, _ in backend.calls if name == "unit_kinds")


async def test_long_mode_reward_max_pools_over_paragraphs(nuggets: Nuggets) -> None:
    r = await nuggets.client.post("/v1/nuggets/verify", json=body())
    assert r.status_code == 200, r.text
    out = r.json()
    labels = [(n["label"], n["block"]) for n in out["nuggets"]]
    assert labels == [
        ("support", 0),
        ("partial_support", 0),
        ("support", 1),
        ("not_support", None),
    ]
    # (1·1 + 1·0.5 + 0.5·1 + 0.5·0) / (1 + 1 + 0.5 + 0.5)
    assert out["reward"] == pytest.approx(2.0 / 3.0)
    assert [n["weight"] for n in out["nuggets"]] == [1.0, 1.0, 0.5, 0.5]
    assert [b["labels"][0] for b in out["blocks"]] == ["support", "not_support", "not_support"]
    for block in out["blocks"]:
        assert ANSWER[block["start"] : block["end"]].strip()
    assert out["batch_size"] == 10
    assert nugget_calls(nuggets.backend) == 3  # 3 blocks x 1 batch
    assert unit_calls(nuggets.backend) == 3  # each block read as units once
    assert out["usage"]["calls"] == 6
    assert out["judge"] == {
        "model": "fake-judge",
        "backend": "fake",
        "repairs": 0,
        "lexical_prior": "off",
        "design": "generate",
        "calibration": None,
    }
    assert out["soft_reward"] is None


@pytest.mark.parametrize(("batch_size", "calls"), [(1, 12), (2, 6), (10, 3)])
async def test_batch_size_sets_the_calls_not_the_reward(
    nuggets: Nuggets, batch_size: int, calls: int
) -> None:
    r = await nuggets.client.post("/v1/nuggets/verify", json=body(batch_size=batch_size))
    assert r.status_code == 200, r.text
    assert r.json()["reward"] == pytest.approx(2.0 / 3.0)
    assert calls == nugget_calls(nuggets.backend)
    assert r.json()["usage"]["calls"] == calls + unit_calls(nuggets.backend)


async def test_empty_answer_scores_zero_without_a_model_call(nuggets: Nuggets) -> None:
    r = await nuggets.client.post("/v1/nuggets/verify", json=body(answer=" \n\n "))
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["reward"] == 0.0 and out["blocks"] == [] and out["judge"] is None
    assert out["batch_size"] is None
    assert {n["decided_by"] for n in out["nuggets"]} == {"empty_answer"}
    assert nugget_calls(nuggets.backend) == 0


async def test_short_mode_exact_match_decides_without_the_model(nuggets: Nuggets) -> None:
    r = await nuggets.client.post(
        "/v1/nuggets/verify",
        json={
            "question": "Which tower is in Paris?",
            "answer": "<answer>The Eiffel Tower.</answer>",
            "nuggets": [{"text": "Eiffel Tower"}],
            "mode": "short",
        },
    )
    assert r.status_code == 200, r.text
    (n,) = r.json()["nuggets"]
    assert (n["label"], n["decided_by"], r.json()["reward"]) == ("support", "exact_match", 1.0)
    assert nugget_calls(nuggets.backend) == 0


async def test_short_mode_model_judges_what_exact_match_rejects(nuggets: Nuggets) -> None:
    for answer, label, reward in [
        ("It is the Eiffel Tower in Paris, France", "support", 1.0),
        ("the Louvre", "not_support", 0.0),
    ]:
        r = await nuggets.client.post(
            "/v1/nuggets/verify",
            json={
                "question": "Which tower is in Paris?",
                "answer": answer,
                "nuggets": [{"text": "Eiffel Tower"}],
                "mode": "short",
            },
        )
        assert r.status_code == 200, r.text
        (n,) = r.json()["nuggets"]
        assert (n["label"], n["decided_by"], r.json()["reward"]) == (label, "model", reward)
    assert nugget_calls(nuggets.backend) == 2
    assert all("partial_support" not in p for p in nuggets.labeller.prompts)


async def test_short_mode_without_exact_match_always_asks_the_model(nuggets: Nuggets) -> None:
    r = await nuggets.client.post(
        "/v1/nuggets/verify",
        json={
            "question": "q",
            "answer": "Eiffel Tower",
            "nuggets": [{"text": "Eiffel Tower"}],
            "mode": "short",
            "exact_match": False,
        },
    )
    assert r.json()["nuggets"][0]["decided_by"] == "model"
    assert nugget_calls(nuggets.backend) == 1


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"mode": "short"}, "nuggets"),
        ({"nuggets": []}, "nuggets"),
        ({"nuggets": [{"text": "x", "importance": "critical"}]}, "nuggets[0].importance"),
        ({"nuggets": [{"text": "  "}]}, "nuggets[0].text"),
        ({"batch_size": 0}, "batch_size"),
        ({"mode": "medium"}, "mode"),
    ],
)
async def test_bad_input_is_a_422_with_a_field(
    nuggets: Nuggets, patch: dict[str, Any], field: str
) -> None:
    r = await nuggets.client.post("/v1/nuggets/verify", json=body(**patch))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    assert nugget_calls(nuggets.backend) == 0


@pytest.mark.parametrize("labeller", [FakeNuggetLabeller(short_replies=1)])
async def test_a_miscounted_reply_is_repaired(nuggets: Nuggets) -> None:
    r = await nuggets.client.post("/v1/nuggets/verify", json=body(answer=ANSWER.split("\n\n")[0]))
    assert r.status_code == 200, r.text
    assert r.json()["judge"]["repairs"] == 1
    assert r.json()["usage"]["calls"] == 2 + unit_calls(nuggets.backend)


@pytest.mark.parametrize("labeller", [FakeNuggetLabeller(short_replies=2)])
async def test_a_miscounted_reply_twice_is_an_error_with_usage_never_a_zero(
    nuggets: Nuggets,
) -> None:
    r = await nuggets.client.post("/v1/nuggets/verify", json=body(answer=ANSWER.split("\n\n")[0]))
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["type"] == "judge_output_invalid"
    assert "expected exactly 4 labels" in error["message"]
    assert error["usage"]["calls"] == 2 + unit_calls(nuggets.backend)
    assert error["usage"]["prompt_tokens"] > 0
    assert "reward" not in r.json()


async def test_verifier_down_is_a_503(nuggets: Nuggets) -> None:
    r = await nuggets.client.post(
        "/v1/nuggets/verify", json=body(answer="[[verifier-down]] nonpartisan")
    )
    assert r.status_code == 503, r.text
    assert r.json()["error"]["type"] == "backend_unavailable"
    # the block was read as units (one call); the labelling call failed
    assert r.json()["error"]["usage"]["calls"] == unit_calls(nuggets.backend) == 1


async def test_probabilities_requested_from_a_backend_without_logprobs(nuggets: Nuggets) -> None:
    r = await nuggets.client.post("/v1/nuggets/verify", json=body(label_probabilities=True))
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["soft_reward"] is None
    assert all(n["probabilities"] is None for n in out["nuggets"])


async def test_batch_scores_items_and_reports_failed_ones_without_zeroing(
    nuggets: Nuggets,
) -> None:
    items = [
        body(),
        body(answer="[[verifier-down]] nonpartisan fact tank"),
        {
            "question": "q",
            "answer": "Eiffel Tower",
            "nuggets": [{"text": "eiffel tower"}],
            "mode": "short",
        },
        body(mode="short"),  # four nuggets in short mode: this item is invalid
        body(answer=""),
    ]
    r = await nuggets.client.post("/v1/nuggets/verify-batch", json={"items": items})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["rewards"][0] == pytest.approx(2.0 / 3.0)
    assert out["rewards"][1] is None and out["rewards"][3] is None
    assert out["rewards"][2] == 1.0 and out["rewards"][4] == 0.0
    assert (out["succeeded"], out["failed"]) == (3, 2)
    down, invalid = out["items"][1]["error"], out["items"][3]["error"]
    assert (down["type"], down["status"]) == ("backend_unavailable", 503)
    assert (invalid["type"], invalid["status"], invalid["field"]) == (
        "validation_error",
        422,
        "items[3].nuggets",
    )
    assert [item["index"] for item in out["items"]] == [0, 1, 2, 3, 4]
    # item 0: three blocks, each read as units and labelled; item 1: its block read as units,
    # then its labelling call failed
    assert out["usage"]["calls"] == 3 + 3 + 1


async def test_batch_limits(nuggets: Nuggets) -> None:
    r = await nuggets.client.post("/v1/nuggets/verify-batch", json={"items": []})
    assert r.status_code == 422 and r.json()["error"]["field"] == "items"


async def test_verifier_task_route_directly(nuggets: Nuggets) -> None:
    async with httpx.AsyncClient(base_url=nuggets.verifier_url) as verifier:
        r = await verifier.post(
            "/v1/tasks/nugget-labels",
            json={"question": "q", "blocks": ["alpha beta"], "nuggets": ["alpha", "gamma"]},
        )
    assert r.status_code == 200, r.text
    assert r.json()["blocks"] == [{"labels": ["support", "not_support"], "probabilities": None}]
    assert r.json()["formats"] == ["json"]


def _all_not_support(user: str, params: object) -> str:
    """A fake verifier that never sees support (a pessimistic small model)."""
    n = user.rsplit("exactly ", 1)[1].split(" ", 1)[0]
    return json.dumps(["not_support"] * int(n))


@pytest.mark.parametrize(
    ("rule", "labels"),
    [
        ("off", ["not_support", "not_support", "not_support", "not_support"]),
        ("max", ["support", "partial_support", "support", "not_support"]),
        ("soften", ["partial_support", "not_support", "partial_support", "not_support"]),
    ],
)
async def test_lexical_prior_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rule: str, labels: list[str]
) -> None:
    monkeypatch.setenv("RUBRICATE_NUGGETS_LEXICAL_PRIOR", rule)
    monkeypatch.setenv("RUBRICATE_NUGGETS_OVERLAP_SUPPORT", "1.0")
    monkeypatch.setenv("RUBRICATE_NUGGETS_OVERLAP_PARTIAL", "0.5")
    backend = FakeJudgeBackend(handlers={"nugget_labels": _all_not_support})
    platform = EmbeddedPlatform(
        data_dir=tmp_path, ports=dict.fromkeys(SERVICES, 0), llm=fast_llm(), backend=backend
    )
    async with platform, httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=30) as client:
        r = await client.post("/v1/nuggets/verify", json=body())
    assert r.status_code == 200, r.text
    assert [n["label"] for n in r.json()["nuggets"]] == labels
    assert r.json()["judge"]["lexical_prior"] == rule


# --- issue 17: a failed label call is never `not_support` -> 0 ----------------------------


@pytest.mark.parametrize("failure", ["error", "garbage"])
async def test_a_failed_label_call_is_an_error_never_a_zero(nuggets: Nuggets, failure: str) -> None:
    """The judge answers HTTP 500 (transport error) or unparseable text: the single verify is
    an error, a batch item and a `/get_reward` nugget sample are null, never `not_support`."""
    from prometheus_client import REGISTRY

    if failure == "error":
        nuggets.backend.failing_tasks.add("nugget_labels")
    else:
        nuggets.backend.garbage_tasks.add("nugget_labels")
    r = await nuggets.client.post("/v1/nuggets/verify", json=body())
    assert r.status_code in (502, 503), r.text
    assert set(r.json()) == {"error"} and r.json()["error"]["type"]

    def unscored() -> float:
        value = REGISTRY.get_sample_value("rubricate_fallbacks_total", {"kind": "nugget_unscored"})
        return value or 0.0

    before = unscored()
    r = await nuggets.client.post("/v1/nuggets/verify-batch", json={"items": [body(), body()]})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["rewards"] == [None, None] and (out["succeeded"], out["failed"]) == (0, 2)
    assert unscored() == before + 2

    label = {"kind": "nugget", "question": QUESTION, "nuggets": NUGGETS}
    r = await nuggets.client.post(
        "/get_reward", json={"query": [ANSWER], "labels": [json.dumps(label)]}
    )
    assert r.status_code == 200, r.text
    assert r.json()["rewards"] == [None]
    assert r.json()["extra_logs"]["rubricate/scored"] == [0.0]


async def test_the_default_fake_judge_answers_nugget_tasks(running: Running) -> None:
    """`--fake-judge` runs (examples, benchmarks) get nugget rewards: the fake judge labels
    nuggets by default (issue 16 found every nugget reward None there)."""
    r = await running.client.post("/v1/nuggets/verify", json=body())
    assert r.status_code == 200, r.text
    assert isinstance(r.json()["reward"], float)
    assert any(name == "nugget_labels" for name, _ in running.backend.calls)
