"""Issue 17, "A judge that fails never hands out a reward", for `/v1/stagewise/score`: every
path that ends with no judgment is an error in the one error shape or a flagged, excluded
value (null), never a 0.0 a trainer would train on. The real services run embedded; the judge
is the FakeJudgeBackend, told to fail (transport error, as an HTTP 500 from a model server
becomes) or to reply garbage."""

from typing import Any

import pytest
from prometheus_client import REGISTRY

from rubricate.common.upstream import ServiceClient, UpstreamError
from rubricate.stagewise.gateway.service import keep_scoring
from rubricate_client.schemas.stagewise import RolloutResult, StagewiseScoreRequest
from tests.support.gateway import Running, trajectory

QUESTION = "Why was the Mars Climate Orbiter lost?"
STAGES = ("plan", "research", "review", "answer")
PERSISTENT = {"title": "Names the unit mismatch", "description": "Says lbf vs N.", "weight": 3}


def group(*markers: str, **extra: Any) -> dict[str, Any]:
    return {
        "question": QUESTION,
        "rollouts": [{"id": f"r{i}", "trajectory": trajectory(m)} for i, m in enumerate(markers)],
        **extra,
    }


def fallbacks(kind: str) -> float:
    return REGISTRY.get_sample_value("rubricate_fallbacks_total", {"kind": kind}) or 0.0


def assert_error_shape(body: dict[str, Any], type_: str) -> None:
    assert set(body) == {"error"}
    assert body["error"]["type"] == type_ and body["error"]["message"]


@pytest.mark.parametrize("failure", ["error", "garbage"])
async def test_empty_buffer_and_failed_generation_is_a_502_not_zeros(
    running: Running, failure: str
) -> None:
    """The silent-zero path of the issue: no rubrics yet, generation fails (HTTP 500 or
    unparseable text) -> there is nothing to judge on -> 502, not 200 with every R = 0."""
    if failure == "error":
        running.backend.fail_generation = True
    else:
        running.backend.garbage_tasks.add("stage_rubrics")
    before = fallbacks("no_rubrics")
    response = await running.client.post("/v1/stagewise/score", json=group("", "[[poor]]"))
    assert response.status_code == 502, response.text
    assert_error_shape(response.json(), "judge_unavailable")
    assert "rubric generation failed" in response.json()["error"]["message"]
    assert [k for k, _ in running.backend.calls].count("score_sheet") == 0
    assert fallbacks("no_rubrics") == before + 1


async def test_empty_buffer_without_evolve_is_a_409_not_zeros(running: Running) -> None:
    response = await running.client.post(
        "/v1/stagewise/score", json=group("", "[[poor]]", evolve=False)
    )
    assert response.status_code == 409, response.text
    assert_error_shape(response.json(), "no_rubrics")
    assert response.json()["error"]["field"] == "evolve"


async def test_stage_without_rubric_is_null_and_excluded_from_advantages(
    running: Running,
) -> None:
    """Generation failed but persistent answer rubrics exist: plan/research/review have no
    judgment -> null R, G and A (never 0.0); the answer stage is scored and normalized."""
    running.backend.fail_generation = True
    before = fallbacks("stage_unscored")
    response = await running.client.post(
        "/v1/stagewise/score",
        json=group("[[excellent]]", "[[poor]]", persistent_rubrics=[PERSISTENT]),
    )
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["unscored_stages"] == ["plan", "research", "review"]
    best, worst = out["rollouts"]
    for r in (best, worst):
        for stage in ("plan", "research", "review"):
            assert r["scores"][stage] is None
            assert r["returns"][stage] is None
            assert r["advantages"][stage] is None
    assert best["scores"]["answer"] == 1.0 and worst["scores"]["answer"] == 0.0
    assert best["advantages"]["answer"] == pytest.approx(1.0, abs=1e-3)
    assert worst["advantages"]["answer"] == pytest.approx(-1.0, abs=1e-3)
    assert fallbacks("stage_unscored") == before + 3


async def test_garbage_scoring_is_unscored_never_zero(running: Running) -> None:
    """The verifier's reply is unparseable for every rollout: no rollout has a judgment ->
    502, not a group of zeros."""
    running.backend.garbage_tasks.add("score_sheet")
    response = await running.client.post("/v1/stagewise/score", json=group("", "[[poor]]"))
    assert response.status_code == 502, response.text
    assert_error_shape(response.json(), "judge_unavailable")


async def test_a_rollout_whose_judgment_is_invalid_is_not_judged_again_on_all_its_rubrics(
    running: Running,
) -> None:
    """A 502 in a rollout's slot of the group call (invalid output after the repair call)
    goes straight to the answer-only call, as the rollout's own call did: per rollout two
    score sheets on all its rubrics (the call and its repair) and two on its answer ones."""
    running.backend.garbage_tasks.add("score_sheet")
    await running.client.post("/v1/stagewise/score", json=group("", "[[poor]]"))
    sheets = [user for schema, user in running.backend.calls if schema == "score_sheet"]
    assert len(sheets) == 8


async def test_answer_only_fallback_and_unscored_rollout_are_flagged(running: Running) -> None:
    before = fallbacks("answer_only"), fallbacks("unscored")
    out = (
        await running.client.post(
            "/v1/stagewise/score",
            json=group("[[excellent]] [[fail-stagewise]]", "[[fail-all]]", "[[poor]]", ""),
        )
    ).json()
    fallback, dead, poor, mid = out["rollouts"]
    assert fallback["fallback"]["kind"] == "answer_only"
    assert fallback["scores"] == dict.fromkeys(STAGES, 1.0)
    assert dead["fallback"]["kind"] == "unscored" and dead["fallback"]["reason"]
    assert dead["scores"] is None and dead["returns"] is None and dead["advantages"] is None
    # the unscored rollout is out of the normalization: the others' advantages sum to 0
    for stage in STAGES:
        assert sum(r["advantages"][stage] for r in (fallback, poor, mid)) == pytest.approx(
            0.0, abs=1e-6
        )
    assert (fallbacks("answer_only"), fallbacks("unscored")) == (before[0] + 1, before[1] + 1)


async def test_a_2xx_carries_a_stored_scoring_id(running: Running) -> None:
    out = (await running.client.post("/v1/stagewise/score", json=group("", "[[poor]]"))).json()
    assert out["scoring_id"] and out["scoring_not_stored"] is None
    stored = await running.client.post(
        "/v1/reflections/score",
        json={
            "question": QUESTION,
            "trajectory": trajectory(""),
            "scoring_id": out["scoring_id"],
            "rollout_id": "r0",
            "candidates": ["<reflection>x</reflection>"],
        },
    )
    assert stored.status_code != 404, stored.text  # the record is there to refer to


async def test_a_scoring_the_store_cannot_keep_says_why(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = ServiceClient.request
    writes: list[str] = []

    async def flaky(self: ServiceClient, method: str, path: str, **kw: Any) -> Any:
        if method == "POST" and path == "/v1/scorings":
            writes.append(path)
            raise UpstreamError(service="store", status=503, type="unavailable", message="down")
        return await real(self, method, path, **kw)

    monkeypatch.setattr(ServiceClient, "request", flaky)
    before = fallbacks("scoring_not_stored")
    response = await running.client.post("/v1/stagewise/score", json=group("", "[[poor]]"))
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["scoring_id"] is None
    assert "could not keep the scoring record" in out["scoring_not_stored"]
    assert len(writes) == 2  # retried once before giving up
    assert fallbacks("scoring_not_stored") == before + 1


class _Store:
    """A fake store client for `keep_scoring`: answers the scripted errors, then succeeds."""

    def __init__(self, *errors: UpstreamError) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def request(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)


def _err(status: int | None) -> UpstreamError:
    return UpstreamError(service="store", status=status, type="x", message=f"status {status}")


async def _keep(store: _Store) -> tuple[str | None, str | None]:
    request = StagewiseScoreRequest.model_validate(group(""))
    return await keep_scoring(
        store,  # type: ignore[arg-type]
        tenant="t",
        question_id="q",
        request=request,
        rubrics={},
        results=[
            RolloutResult(
                id="r0",
                spans=dict.fromkeys(STAGES),
                missing_stages=[],
                scores=None,
                returns=None,
                advantages=None,
                judgments=[],
            )
        ],
    )


async def test_keep_scoring_retries_a_transient_failure() -> None:
    store = _Store(_err(None))
    scoring_id, why = await _keep(store)
    assert scoring_id and why is None and store.calls == 2


async def test_keep_scoring_a_duplicate_on_retry_means_the_first_write_landed() -> None:
    store = _Store(_err(503), _err(409))
    scoring_id, why = await _keep(store)
    assert scoring_id and why is None


async def test_keep_scoring_does_not_retry_a_refusal() -> None:
    store = _Store(_err(422), _err(422))
    scoring_id, why = await _keep(store)
    assert scoring_id is None and why and "status 422" in why and store.calls == 1


async def test_over_grpc_the_no_rubrics_502_is_unavailable_and_nulls_survive(
    running: Running,
) -> None:
    """The same contract over gRPC: the 502 is UNAVAILABLE with the same error body, a null
    stage score stays null (not 0.0), and `scoring_not_stored` has its proto field."""
    from rubricate_client import APIError, AsyncGrpcClient, RetryPolicy

    rpc = AsyncGrpcClient(running.platform.urls["gateway-grpc"], retry=RetryPolicy(max_retries=0))
    running.backend.fail_generation = True
    with pytest.raises(APIError) as caught:
        await rpc.score_stagewise(group("", "[[poor]]"))
    assert (caught.value.status, caught.value.grpc_code) == (502, "UNAVAILABLE")
    out = await rpc.score_stagewise(
        group("[[excellent]]", "[[poor]]", persistent_rubrics=[PERSISTENT])
    )
    assert out.rollouts[0].scores == {"plan": None, "research": None, "review": None, "answer": 1.0}
    assert out.rollouts[1].advantages is not None and out.rollouts[1].advantages["plan"] is None
    assert out.scoring_id and out.scoring_not_stored is None
    running.backend.fail_generation = False
    reward = await rpc.get_reward(
        {"query": [trajectory("[[fail-all]]"), trajectory("")], "labels": [{"question": "Q2"}] * 2}
    )
    assert reward.rewards == [None, 0.5]
    assert reward.extra_logs["rubricate/scored"] == [0.0, 1.0]


async def _short_group_scores(
    service: Any, request: Any
) -> Any:  # a FAKE group route: one outcome fewer than the trajectories sent
    out = await service.group_stage_scores(request)
    return out.model_copy(update={"trajectories": out.trajectories[:-1]})


@pytest.mark.parametrize("verifier", ["without the group route", "short group answers"])
async def test_a_failed_group_call_still_scores_every_rollout(
    running: Running, verifier: str
) -> None:
    """A verifier of an older release (no `GROUP_STAGE_SCORES`, as during a rolling
    upgrade) answers the group call 404; a broken one answers fewer outcomes than rollouts:
    either way each rollout is judged alone, and the group gets the scores the group route
    gives."""
    import httpx

    from rubricate.common.upstream import Upstreams
    from rubricate.gateway.settings import GatewaySettings
    from rubricate.llm.server import TaskRoute, TaskSettings, create_model_server_app, task_router
    from rubricate.stagewise.gateway.service import StagewiseService
    from rubricate.stagewise.verifier.endpoints import GROUP_STAGE_SCORES, STAGE_SCORES
    from rubricate.stagewise.verifier.routes import STATE_NAME
    from rubricate.stagewise.verifier.service import StageScoringService
    from tests.support.gateway import fast_llm

    routes = [TaskRoute(STAGE_SCORES, StageScoringService.stage_scores)]
    if verifier == "short group answers":
        routes.append(TaskRoute(GROUP_STAGE_SCORES, _short_group_scores))
    old = create_model_server_app(
        service="verifier",
        routers=[task_router(STATE_NAME, *routes)],
        services={STATE_NAME: StageScoringService.factory},
        backend=running.backend,
        llm=fast_llm(),
        tasks=TaskSettings(scoring_design="generate"),
    )

    def client(service: str, **transport: Any) -> ServiceClient:
        url = running.platform.urls.get(service, "http://old-verifier")
        return ServiceClient(service=service, base_url=url, timeout_s=30, retries=0, **transport)

    async with old.router.lifespan_context(old):
        if verifier == "without the group route":
            probe = httpx.AsyncClient(transport=httpx.ASGITransport(app=old), base_url="http://v")
            async with probe:
                assert (await probe.post(GROUP_STAGE_SCORES.path, json={})).status_code == 404
        upstreams = Upstreams(
            generator=client("rubric-generator"),
            verifier=client("verifier-old", transport=httpx.ASGITransport(app=old)),
            store=client("store"),
        )
        service = StagewiseService(upstreams=upstreams, settings=GatewaySettings())
        try:
            body = group("[[excellent]]", "[[poor]]", "")
            alone = await service.score(StagewiseScoreRequest.model_validate(body), tenant="t1")
        finally:
            await upstreams.aclose()
    grouped = (await running.client.post("/v1/stagewise/score", json=body)).json()
    assert [r.fallback for r in alone.rollouts] == [None, None, None]
    assert [r.scores for r in alone.rollouts] == [g["scores"] for g in grouped["rollouts"]]
