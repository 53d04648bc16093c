"""The step endpoints through the public HTTP API, every service running for real, with a
FakeJudgeBackend whose handlers (`rubricate.testing.fake_steps`) answer the step tasks from
markers in the prompt:

- step_rubric: k criteria "fake criterion i", weights 3, 2, 1, 1, …
- step_verdicts: criterion i is satisfied when the action holds `[[ci]]` (or `[[all]]`);
  `[[fail]]` in the criteria or the action is a transport error;
- listwise_rank: candidates ordered by their `[[q=N]]` marker, highest first; a judge whose
  seed is in FAKE_GARBAGE_SEEDS replies with text that is not a ranking.
"""

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from rubricate.embedded import SERVICES, EmbeddedPlatform, free_port
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.base import GenerationParams
from rubricate.steps.domain.listwise import judge_seed
from rubricate.testing import fake_steps
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_steps import fake_step_rubric, fake_step_verdicts
from tests.support.gateway import Running, fast_llm

QUESTION = "Why was the Mars Climate Orbiter lost?"
FAKE_GARBAGE_SEEDS: set[int] = set()


def fake_listwise_rank(user: str, params: GenerationParams) -> str:
    """The shared fake ranking, except for judges whose seed is in FAKE_GARBAGE_SEEDS."""
    if params.seed in FAKE_GARBAGE_SEEDS:
        return "I would rather not rank these."
    return fake_steps.fake_listwise_rank(user, params)


@pytest.fixture
async def steps(tmp_path: Path) -> AsyncIterator[Running]:
    FAKE_GARBAGE_SEEDS.clear()
    backend = FakeJudgeBackend(
        handlers={
            "step_rubric": fake_step_rubric,
            "step_verdicts": fake_step_verdicts,
            "listwise_rank": fake_listwise_rank,
        }
    )
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0, max_body_bytes=200_000),
    )
    async with platform, httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=30) as c:
        yield Running(platform=platform, backend=backend, client=c)


def kinds(running: Running) -> list[str]:
    return [k for k, _ in running.backend.calls]


TRAJECTORY = (
    "<think>plan</think>\n"
    '<call_tool name="search">[[c1]] mars orbiter</call_tool><tool_output>o1</tool_output>\n'
    '<call_tool name="browse">nothing marked</call_tool><tool_output>o2</tool_output>\n'
    "<answer>[[all]] pound-force vs newton</answer>"
)


# --- segmentation -------------------------------------------------------------------------


async def test_segment_text_and_messages(steps: Running) -> None:
    r = await steps.client.post("/v1/steps/segment", json={"trajectory": TRAJECTORY})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["markup"] == "call_tool" and out["rendered"] is None
    assert [s["kind"] for s in out["steps"]] == ["tool", "tool", "final"]
    start, end = out["steps"][0]["action_span"]
    assert TRAJECTORY[start:end].startswith('<call_tool name="search">')
    assert out["steps"][-1]["span"][1] == len(TRAJECTORY)
    messages = [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "searching"}],
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "search", "arguments": {"q": "orbiter"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "result"},
        {"role": "assistant", "content": "final answer"},
    ]
    r = await steps.client.post("/v1/steps/segment", json={"trajectory": messages})
    out = r.json()
    assert r.status_code == 200, r.text
    assert out["markup"] == "messages" and out["prompt_messages"] == 1
    assert [s["message_span"] for s in out["steps"]] == [[1, 3], [3, 4]]
    start, end = out["steps"][0]["action_span"]
    assert '"q": "orbiter"' in out["rendered"][start:end]
    assert steps.backend.calls == []  # no model call


async def test_segment_rejects_an_empty_trajectory(steps: Running) -> None:
    r = await steps.client.post("/v1/steps/segment", json={"trajectory": "   "})
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "trajectory"


# --- rubric and verify --------------------------------------------------------------------


async def test_rubric_weights_sum_to_one_and_render(steps: Running) -> None:
    body = {"question": QUESTION, "history": TRAJECTORY[:60], "k": 3}
    r = await steps.client.post("/v1/steps/rubric", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    weights = [c["weight"] for c in out["criteria"]]
    assert weights == pytest.approx([0.5, 1 / 3, 1 / 6])
    assert sum(weights) == pytest.approx(1.0)
    assert "fake criterion 2" in out["rendered"] and out["rendered"].startswith("<step_rubric>")
    assert out["usage"]["calls"] == 1
    assert kinds(steps) == ["step_rubric"]
    assert "plan" in steps.backend.calls[0][1]  # the history reached the prompt


async def test_verify_pass_threshold_and_feedback(steps: Running) -> None:
    rubric = {
        "criteria": [
            {"text": "Targets the report", "weight": 2},
            {"text": "Names NASA", "weight": 1},
            {"text": "Uses a date", "weight": 1},
        ]
    }
    base = {"question": QUESTION, "history": "", "rubric": rubric}
    r = await steps.client.post("/v1/steps/verify", json={**base, "action": "search [[c1]]"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["score"] == 0.5 and out["pass"] is True and out["threshold"] == 0.5
    assert out["retry"] is False
    assert [v["satisfied"] for v in out["verdicts"]] == [True, False, False]
    assert "Names NASA" in out["feedback"] and "Uses a date" in out["feedback"]
    assert "criterion 2: Names NASA" in out["feedback"]
    assert "Targets the report" not in out["feedback"]
    r = await steps.client.post("/v1/steps/verify", json={**base, "action": "search [[c2]]"})
    assert r.json()["score"] == 0.25 and r.json()["pass"] is False and r.json()["retry"] is True
    retried = {**base, "action": "search [[c2]]", "attempt": 1}
    r = await steps.client.post("/v1/steps/verify", json=retried)
    assert r.json()["pass"] is False and r.json()["retry"] is False  # one retry per step
    r = await steps.client.post(
        "/v1/steps/verify", json={**base, "action": "search [[c2]]", "threshold": 0.25}
    )
    assert r.json()["pass"] is True
    r = await steps.client.post(
        "/v1/steps/verify", json={**base, "action": "search the report [[all]]"}
    )
    assert r.json()["feedback"] is None and r.json()["score"] == 1.0


async def test_verify_judge_failure_is_an_error_not_a_zero(steps: Running) -> None:
    body = {
        "question": QUESTION,
        "action": "search [[fail]]",
        "rubric": {"criteria": [{"text": "x"}]},
    }
    r = await steps.client.post("/v1/steps/verify", json=body)
    assert r.status_code == 503
    error = r.json()["error"]
    assert error["type"] == "backend_unavailable"
    # the action was read as units (one call); the verdict's transport failures paid nothing
    assert error["usage"]["calls"] == 1
    # retried once by the LLM layer (fast_llm: max_retries=1) before giving up
    assert kinds(steps).count("step_verdicts") == 2


async def test_verify_rejects_bad_weights_with_a_field(steps: Running) -> None:
    body = {
        "question": QUESTION,
        "action": "a",
        "rubric": {"criteria": [{"text": "x", "weight": 1}, {"text": "y", "weight": 0}]},
    }
    r = await steps.client.post("/v1/steps/verify", json=body)
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "rubric.criteria[1].weight"
    assert steps.backend.calls == []


# --- step rewards -------------------------------------------------------------------------


async def test_score_decomposes_the_outcome_over_steps(steps: Running) -> None:
    body = {"question": QUESTION, "trajectory": TRAJECTORY, "outcome": 0.9}
    r = await steps.client.post("/v1/steps/score", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["decomposition"] == "proportional" and out["failed_steps"] == []
    scores = [s["score"] for s in out["steps"]]
    # weights 3/6, 2/6, 1/6; step 0 satisfies criterion 1, step 1 nothing, final all
    assert scores == pytest.approx([0.5, 0.0, 1.0])
    rewards = [s["reward"] for s in out["steps"]]
    assert sum(rewards) == 0.9
    assert rewards == pytest.approx([0.3, 0.0, 0.6])
    assert out["steps"][1]["reward"] == 0.0  # all-zero step
    assert all(s["rubric"]["rendered"] for s in out["steps"])
    assert kinds(steps).count("step_rubric") == 3 and kinds(steps).count("step_verdicts") == 3
    assert kinds(steps).count("unit_kinds") == 3  # each action read as units once
    assert out["usage"]["calls"] == 9
    # the generator saw h_t: nothing for step 0, the first step's text for step 1
    rubric_prompts = [u for k, u in steps.backend.calls if k == "step_rubric"]
    assert sum("(no steps yet)" in u for u in rubric_prompts) == 1


async def test_score_all_zero_steps_split_evenly(steps: Running) -> None:
    body = {
        "question": QUESTION,
        "steps": [{"action": "a", "observation": "o"}, {"action": "b"}],
        "outcome": 1.0,
    }
    r = await steps.client.post("/v1/steps/score", json=body)
    out = r.json()
    assert r.status_code == 200, r.text
    assert out["markup"] == "steps" and out["rendered"] == "a\no\nb\n"
    assert out["decomposition"] == "uniform"
    assert [s["reward"] for s in out["steps"]] == [0.5, 0.5]


async def test_score_with_given_rubrics_and_a_failed_step(steps: Running) -> None:
    rubric = {"criteria": [{"text": "one", "weight": 1}, {"text": "two", "weight": 1}]}
    body = {
        "question": QUESTION,
        "steps": [
            {"action": "[[c1]]"},
            {"action": "[[fail]]"},
            {"action": "[[c1]] [[c2]]"},
        ],
        "rubrics": [rubric, rubric, None],
        "outcome": 1.0,
    }
    r = await steps.client.post("/v1/steps/score", json=body)
    out = r.json()
    assert r.status_code == 200, r.text
    assert out["failed_steps"] == [1]
    failed = out["steps"][1]
    assert failed["status"] == "failed" and failed["reward"] is None and failed["error"]
    rewards = [out["steps"][0]["reward"], out["steps"][2]["reward"]]
    assert sum(rewards) == 1.0
    # step 2's rubric was generated (weights 3/6, 2/6, 1/6): criteria 1 and 2 met → 5/6
    assert [out["steps"][0]["score"], out["steps"][2]["score"]] == pytest.approx([0.5, 5 / 6])
    assert rewards == pytest.approx([0.375, 0.625])
    assert kinds(steps).count("step_rubric") == 1


async def test_score_fails_when_no_step_can_be_scored(steps: Running) -> None:
    body = {"question": QUESTION, "steps": [{"action": "[[fail]]"}], "outcome": 1.0}
    r = await steps.client.post("/v1/steps/score", json=body)
    assert r.status_code == 502
    assert r.json()["error"]["type"] == "judge_unavailable"
    # the rubric generation and the action's reading as units were paid for
    assert r.json()["error"]["usage"]["calls"] == 2


async def test_score_rejects_bad_requests(steps: Running) -> None:
    both = {"question": QUESTION, "trajectory": "x", "steps": [{"action": "y"}], "outcome": 1}
    r = await steps.client.post("/v1/steps/score", json=both)
    assert r.status_code == 422 and r.json()["error"]["field"] == "trajectory"
    wrong = {"question": QUESTION, "trajectory": TRAJECTORY, "outcome": 1, "rubrics": [None]}
    r = await steps.client.post("/v1/steps/score", json=wrong)
    assert r.status_code == 422 and r.json()["error"]["field"] == "rubrics"
    r = await steps.client.post(
        "/v1/steps/score", json={"question": QUESTION, "trajectory": "x", "outcome": "nan"}
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "outcome"
    assert steps.backend.calls == []


# --- listwise reward ----------------------------------------------------------------------

CANDIDATES = ["[[c1]] [[c2]] [[c3]] best", "[[c1]] [[c2]] good", "[[c1]] fair", "poor"]


def rubric_text(*criteria: str) -> str:
    return json.dumps({"criteria": [{"criterion": c, "weight": 1} for c in criteria]})


async def test_listwise_reward_terms(steps: Running) -> None:
    rubrics = [
        rubric_text("Targets the report", "Names NASA", "Uses a date"),  # sorts all four
        rubric_text("Targets the report"),  # [[0, 1, 2], [3]]
        "just search better",  # unparseable
        rubric_text(*["search the official census data for 2020"] * 3),  # repetition gate
        "```json\n" + rubric_text("Targets the report", "Names NASA") + "\n```",  # fenced
    ]
    body = {
        "question": QUESTION,
        "history": "",
        "candidates": CANDIDATES,
        "expert_ranking": [0, 1, 2, 3],
        "rubrics": rubrics,
    }
    r = await steps.client.post("/v1/rubrics/listwise-reward", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["consensus"] == [[0], [1], [2], [3]] and out["borda_points"] is None
    full, single, junk, repeated, fenced = out["rubrics"]
    assert full["status"] == "ok" and full["rho"] == pytest.approx(1.0)
    assert full["induced_ranking"] == [[0], [1], [2], [3]]
    assert full["candidate_scores"] == pytest.approx([1.0, 2 / 3, 1 / 3, 0.0])
    assert full["r_atom"] == 1.0 and full["r_fmt"] == 1.0
    assert full["reward"] == pytest.approx(1.0)
    assert single["induced_ranking"] == [[0, 1, 2], [3]]
    assert single["rho"] == pytest.approx(3 / 15**0.5)
    assert single["reward"] == pytest.approx(0.75 * (3 / 15**0.5 + 1) / 2 + 0.15 + 0.10)
    assert junk["status"] == "unparseable" and junk["reward"] == 0.0 and junk["r_fmt"] == 0.0
    assert repeated["gated"] is True and repeated["reward"] == 0.0
    assert repeated["repetition"] > 0.4 and repeated["rho"] is None
    assert fenced["r_fmt"] == 0.5 and fenced["status"] == "ok"
    # 3 rubrics were sent to the verifier (not the unparseable or the gated one), 4 calls each
    assert kinds(steps).count("step_verdicts") == 12 and kinds(steps).count("unit_kinds") == 12
    assert out["usage"]["calls"] == 24  # each verdict call reads its action as units
    advantages = [x["advantage"] for x in out["rubrics"]]
    assert all(a is not None for a in advantages) and sum(advantages) == pytest.approx(0.0)
    assert advantages[0] > advantages[2]


async def test_listwise_reward_with_judges_borda_and_a_failed_rubric(steps: Running) -> None:
    body = {
        "question": QUESTION,
        "candidates": CANDIDATES,
        "judge_rankings": [[0, 1, 2, 3], [1, [0, 2], 3], [2, 0, 1, 3]],
        "rubrics": [
            rubric_text("Targets the report", "Names NASA", "Uses a date"),
            rubric_text("[[fail]] criterion"),
        ],
        "k": 3,
    }
    r = await steps.client.post("/v1/rubrics/listwise-reward", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["borda_points"] == [6.5, 6.0, 5.5, 0.0]
    assert out["consensus"] == [[0], [1], [2], [3]]
    ok, failed = out["rubrics"]
    assert ok["reward"] == pytest.approx(1.0) and ok["advantage"] == 0.0
    assert failed["status"] == "error" and failed["reward"] is None and failed["error"]
    assert failed["advantage"] is None and failed["r_fmt"] == 0.5  # 1 criterion, k = 3


async def test_listwise_reward_needs_one_consensus_source(steps: Running) -> None:
    body = {"question": QUESTION, "candidates": CANDIDATES, "rubrics": [rubric_text("a")]}
    r = await steps.client.post("/v1/rubrics/listwise-reward", json=body)
    assert r.status_code == 422 and r.json()["error"]["field"] == "expert_ranking"
    body["judge_rankings"] = [[0, 1, 2, 3], [0, 1, 1, 3]]
    r = await steps.client.post("/v1/rubrics/listwise-reward", json=body)
    assert r.status_code == 422 and r.json()["error"]["field"] == "judge_rankings[1][2]"


# --- multi-judge ranking ------------------------------------------------------------------

SLATE = ["weak [[q=1]]", "best [[q=9]]", "ok [[q=5]]", "bad [[q=0]]"]


async def test_rank_with_three_shuffled_judges(steps: Running) -> None:
    r = await steps.client.post(
        "/v1/rank", json={"question": QUESTION, "candidates": SLATE, "seed": 7}
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["consensus"] == [[1], [2], [0], [3]]
    assert out["borda_points"] == [3.0, 9.0, 6.0, 0.0]
    assert out["dropped"] == [] and out["seed"] == 7 and len(out["judges"]) == 3
    orders = [tuple(j["order"]) for j in out["judges"]]
    assert len(set(orders)) > 1  # every judge saw its own shuffle
    for judge in out["judges"]:
        assert judge["status"] == "ok" and judge["ranking"] == [[1], [2], [0], [3]]
        assert set(judge["labels"]) == {"X", "Y", "Z", "W"}
        assert [judge["labels"][label] for label in "XYZW"] == judge["order"]
    prompts = [u for k, u in steps.backend.calls if k == "listwise_rank"]
    readings = kinds(steps).count("unit_kinds")  # each judge reads each candidate as units
    assert len(prompts) == 3 and readings == 12 and out["usage"]["calls"] == 3 + readings
    assert all('candidate="X"' in p and 'candidate="0"' not in p for p in prompts)


async def test_rank_drops_and_reports_an_unparseable_judge(steps: Running) -> None:
    FAKE_GARBAGE_SEEDS.add(judge_seed(11, 1))
    r = await steps.client.post(
        "/v1/rank", json={"question": QUESTION, "candidates": SLATE, "seed": 11}
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["dropped"] == [1]
    dropped = out["judges"][1]
    assert dropped["status"] == "dropped" and dropped["ranking"] is None
    assert "judge_output_invalid" in dropped["error"] or "invalid" in dropped["error"]
    # the call and its repair were both paid for, and its four candidates' readings
    assert dropped["usage"]["calls"] == 2 + 4
    assert out["consensus"] == [[1], [2], [0], [3]]
    assert out["borda_points"] == [2.0, 6.0, 4.0, 0.0]
    assert out["usage"]["calls"] == 4 + 3 * 4


async def test_rank_fails_with_too_few_valid_judges(steps: Running) -> None:
    FAKE_GARBAGE_SEEDS.update(judge_seed(3, j) for j in range(3))
    r = await steps.client.post(
        "/v1/rank", json={"question": QUESTION, "candidates": SLATE, "seed": 3}
    )
    assert r.status_code == 502
    error = r.json()["error"]
    assert error["type"] == "insufficient_judges"
    assert error["usage"]["calls"] == 3 * (2 + 4)  # each: a call, its repair, four readings
    r = await steps.client.post(
        "/v1/rank",
        json={"question": QUESTION, "candidates": SLATE, "judges": 2, "min_valid": 3},
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "min_valid"


async def test_rank_uses_the_configured_judge_servers_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("RUBRICATE_GATEWAY_STEPS_JUDGE_URLS", json.dumps([url, url]))
    backend = FakeJudgeBackend(handlers={"listwise_rank": fake_listwise_rank})
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports={**dict.fromkeys(SERVICES, 0), "verifier": port},
        llm=fast_llm(),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0),
    )
    async with platform, httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=30) as c:
        r = await c.post(
            "/v1/rank", json={"question": QUESTION, "candidates": SLATE, "judges": 3, "seed": 1}
        )
    assert r.status_code == 200, r.text
    assert [j["server"] for j in r.json()["judges"]] == ["judge-0", "judge-1", "judge-0"]
    assert r.json()["consensus"] == [[1], [2], [0], [3]]


# --- issue 17: a judge that fails never hands out a reward --------------------------------


async def test_unparseable_verdicts_are_an_error_never_a_zero(steps: Running) -> None:
    """The verifier replies garbage: verify is an error, a scored trajectory with no verified
    step is a 502, and the step reward of `/get_reward` is null with scored 0."""
    steps.backend.garbage_tasks.add("step_verdicts")
    body = {"question": QUESTION, "action": "search", "rubric": {"criteria": [{"text": "x"}]}}
    r = await steps.client.post("/v1/steps/verify", json=body)
    assert r.status_code == 502, r.text
    assert set(r.json()) == {"error"}
    r = await steps.client.post(
        "/v1/steps/score", json={"question": QUESTION, "trajectory": TRAJECTORY, "outcome": 1.0}
    )
    assert r.status_code == 502 and r.json()["error"]["type"] == "judge_unavailable"
    r = await steps.client.post(
        "/get_reward",
        json={"query": [TRAJECTORY], "labels": [{"kind": "step", "question": QUESTION}]},
    )
    assert r.status_code == 200, r.text
    assert r.json()["rewards"] == [None] and r.json()["extra_logs"]["rubricate/scored"] == [0.0]


async def test_listwise_reward_with_every_rubric_failing_is_a_502(steps: Running) -> None:
    body = {
        "question": QUESTION,
        "candidates": CANDIDATES,
        "expert_ranking": [0, 1, 2, 3],
        "rubrics": [rubric_text("[[fail]] one"), rubric_text("[[fail]] two")],
        "k": 3,
    }
    r = await steps.client.post("/v1/rubrics/listwise-reward", json=body)
    assert r.status_code == 502, r.text
    assert r.json()["error"]["type"] == "judge_unavailable"
