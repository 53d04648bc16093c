"""Deadlines: a caller's timeout travels with its request (`X-Rubricate-Deadline`), each
judge call gets the time left, and work for a request whose deadline has passed is dropped
and answered 504 `deadline_exceeded` in the one error shape, never scored. The verifier app
runs in process with a FAKE choice-scoring backend that counts its calls; the caller is the
platform's `ServiceClient`, as on the gateway.
The answer's assertion-unit reading is off here: its model calls would mix into the calls
these tests count (it has its own tests: tests/stagewise/verifier/test_units.py)."""

import asyncio
import math
from collections.abc import AsyncIterator, Sequence

import httpx
import pytest
from fastapi import FastAPI

from rubricate.common.deadlines import DEADLINE_HEADER, deadline_scope, time_left
from rubricate.common.upstream import ServiceClient, UpstreamError, upstream_failure
from rubricate.common.usage import Usage
from rubricate.core.rubrics import make_rubric
from rubricate.llm.base import ChoiceScores, Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import DeadlineExceeded, TransportError
from rubricate.llm.retry import sleep_within_deadline
from rubricate.llm.server import TaskSettings, as_service_error
from rubricate.llm.settings import LLMSettings
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate.verifier.app import create_app
from rubricate_client.schemas.rubrics import RubricSpec

PATH = "/v1/tasks/stage-scores"
RUBRICS = [
    make_rubric(
        spec=RubricSpec(title=f"Rubric {n}", description="d"), stage="answer", origin="active"
    )
    for n in range(3)
]
BODY = StageScoresRequest(
    question="q?",
    stages={"plan": None, "research": None, "review": None, "answer": "a"},
    rubrics=RUBRICS,
)


class FakeSlowChoiceBackend(LLMBackend):
    """A fake choice scorer: each call waits `delay_s`, records the time left of the
    request it serves, and counts calls started and finished."""

    name = "fake-choices"
    model = "fake"
    supports_choice_scoring = True

    def __init__(self, *, delay_s: float = 0.0, fail: bool = False) -> None:
        self.delay_s = delay_s
        self.fail = fail
        self.started = 0
        self.finished = 0
        self.time_left: list[float | None] = []

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        raise AssertionError("the choices design does not generate")

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        self.started += 1
        self.time_left.append(time_left())
        if self.fail:
            raise TransportError("the fake model server is down")
        await asyncio.sleep(self.delay_s)
        self.finished += 1
        return ChoiceScores(
            logprobs={"yes": math.log(0.6), "no": math.log(0.4)},
            prompt_tokens=10,
            latency_s=self.delay_s,
            model=self.model,
            backend=self.name,
        )


async def running(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://verifier") as client:
            yield client


def verifier(backend: LLMBackend, **llm: object) -> FastAPI:
    settings = LLMSettings.model_validate(
        {"max_retries": 3, "backoff_base_s": 5.0, "backoff_max_s": 5.0} | llm
    )
    return create_app(
        backend=backend,
        llm=settings,
        tasks=TaskSettings(scoring_design="choices", unit_reading="off"),
    )


async def test_a_request_past_its_deadline_is_dropped_with_504() -> None:
    backend = FakeSlowChoiceBackend(delay_s=0.5)
    async for client in running(verifier(backend)):
        response = await client.post(
            PATH, json=BODY.model_dump(mode="json"), headers={DEADLINE_HEADER: "0.1"}
        )
        await asyncio.sleep(0.6)  # any pass left running would have finished by now
    assert response.status_code == 504
    error = response.json()["error"]
    assert error["type"] == "deadline_exceeded" and "judgments" not in response.json()
    assert "dropped" in error["message"]
    assert (backend.started, backend.finished) == (1, 0)  # cancelled; no call after expiry


async def test_each_judge_call_gets_the_time_left() -> None:
    backend = FakeSlowChoiceBackend()
    async for client in running(verifier(backend)):
        response = await client.post(
            PATH, json=BODY.model_dump(mode="json"), headers={"Request-Timeout": "30"}
        )
    assert response.status_code == 200
    left = backend.time_left
    assert len(left) == len(RUBRICS)
    assert all(v is not None and 0 < v <= 30 for v in left)


async def test_without_a_deadline_calls_have_none() -> None:
    backend = FakeSlowChoiceBackend()
    async for client in running(verifier(backend)):
        response = await client.post(PATH, json=BODY.model_dump(mode="json"))
    assert response.status_code == 200 and backend.time_left == [None] * len(RUBRICS)


@pytest.mark.parametrize("value", ["soon", "0", "-3", "nan"])
async def test_a_malformed_deadline_is_a_400_naming_the_header(value: str) -> None:
    backend = FakeSlowChoiceBackend()
    async for client in running(verifier(backend)):
        response = await client.post(
            PATH, json=BODY.model_dump(mode="json"), headers={DEADLINE_HEADER: value}
        )
    assert response.status_code == 400
    assert response.json()["error"]["field"] == DEADLINE_HEADER
    assert backend.started == 0


async def test_a_failing_backend_is_not_retried_past_the_deadline() -> None:
    backend = FakeSlowChoiceBackend(fail=True)  # backoff up to 5 s, deadline 0.5 s
    async for client in running(verifier(backend)):
        response = await client.post(
            PATH, json=BODY.model_dump(mode="json"), headers={DEADLINE_HEADER: "0.5"}
        )
        calls = backend.started
        await asyncio.sleep(0.6)
    assert response.status_code == 504
    assert response.json()["error"]["type"] == "deadline_exceeded"
    assert backend.started == calls  # nothing retried after the answer


async def test_a_backoff_longer_than_the_time_left_is_not_waited() -> None:
    with deadline_scope(30), pytest.raises(DeadlineExceeded, match="backoff"):
        await sleep_within_deadline(60)


async def test_the_upstream_client_forwards_the_time_left_and_maps_expiry_to_504() -> None:
    backend = FakeSlowChoiceBackend()
    app = verifier(backend)
    async with app.router.lifespan_context(app):
        client = ServiceClient(
            service="verifier",
            base_url="http://verifier",
            timeout_s=60,
            retries=2,
            transport=httpx.ASGITransport(app=app),
        )
        with deadline_scope(20):
            out = await client.task(PATH, BODY, response_model=StageScoresResponse, usage=Usage())
        assert len(out.judgments) == len(RUBRICS)
        assert all(v is not None and 0 < v <= 20 for v in backend.time_left)

        calls = backend.started
        with deadline_scope(0.01):
            await asyncio.sleep(0.02)  # the deadline passes before the call is made
            with pytest.raises(UpstreamError) as info:
                await client.task(PATH, BODY, response_model=StageScoresResponse, usage=Usage())
        await client.aclose()
    assert backend.started == calls  # nothing was sent
    assert info.value.type == "deadline_exceeded"
    error = upstream_failure(info.value)
    assert (error.status_code, error.type) == (504, "deadline_exceeded")


async def test_an_expired_deadline_stops_the_service_before_any_call() -> None:
    backend = FakeSlowChoiceBackend()
    app = verifier(backend)
    async with app.router.lifespan_context(app):
        with deadline_scope(0.01):
            await asyncio.sleep(0.02)
            with pytest.raises(DeadlineExceeded) as info:
                await app.state.stage_scoring.stage_scores(BODY)
    assert backend.started == 0
    error = as_service_error(info.value, task="stage_scoring")
    assert (error.status_code, error.type) == (504, "deadline_exceeded")
