"""The OpenAI-compatible backend's chat completions over the lean HTTP client
(`common.lean_http`, a plain http:// server with no proxy) against the same FAKE server
(fake_openai.py) over httpx: the server receives the same bodies, and the stagewise judge in
the choices design (the audit's reference judge) gives the same judgments, whichever client
carried the calls. The client itself: tests/common/test_lean_http.py."""

import asyncio
import hashlib
import json
from collections.abc import Iterator

import httpx
import pytest
from fastapi import Request

from rubricate.llm.base import GenerationParams, Message
from rubricate.llm.errors import TransportError
from rubricate.llm.openai_compat import OpenAICompatBackend
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.stagewise.verifier.schemas import StageScoresRequest
from rubricate.stagewise.verifier.service import StageScoringService
from rubricate_client.schemas.rubrics import Rubric
from tests.support.servers import serve_app

from .fake_openai import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def hashed_p_yes(prompt: str) -> float:
    """A p(yes) that differs by prompt: a judgment read from the wrong answer shows."""
    return 0.05 + 0.9 * int(hashlib.sha256(prompt.encode()).hexdigest()[:6], 16) / 0xFFFFFF


class Recording(FakeOpenAIServer):
    """The fake server, also noting which client sent each request."""

    def __init__(self) -> None:
        super().__init__(p_yes=hashed_p_yes)
        self.agents: list[str] = []

        @self.app.middleware("http")
        async def note(request: Request, call_next):  # type: ignore[no-untyped-def]
            self.agents.append(request.headers.get("user-agent", ""))
            return await call_next(request)


@pytest.fixture
def served() -> Iterator[tuple[Recording, str]]:
    fake = Recording()
    with serve_app(fake.app, timeout_keep_alive=1) as port:
        yield fake, f"http://127.0.0.1:{port}/v1"


RUBRICS = [
    Rubric(
        id=f"r{i}",
        stage=stage,
        polarity=polarity,
        title=f"{stage} rubric {i}",
        description=f"The {stage} stage names its sources ({i}).",
        origin="active",
    )
    for i, (stage, polarity) in enumerate(
        [
            ("plan", "positive"),
            ("plan", "negative"),
            ("research", "positive"),
            ("review", "positive"),
            ("review", "negative"),
        ]
    )
]


def requests() -> list[StageScoresRequest]:
    return [
        StageScoresRequest(
            question="Why did the orbiter fail?",
            stages={
                "plan": f"Plan {k}: search the mission report, then the review board.",
                "research": f"Search {k} found the review board's report on units.",
                "review": f"Review {k}: two sources agree on the unit mismatch.",
                "answer": None,
            },
            rubrics=RUBRICS,
        )
        for k in range(8)
    ]


async def judged(backend: OpenAICompatBackend) -> list[list[dict[str, object]]]:
    settings = LLMSettings(backend="openai", base_url="http://unused/v1", prefix_cache="shared")
    judge = StageScoringService(
        backend=backend,
        tasks=TaskSettings().model_copy(update={"scoring_design": "choices"}),
        llm=settings,
    )
    try:
        outs = await asyncio.gather(*(judge.stage_scores(r) for r in requests()))
    finally:
        await backend.aclose()
    return [[j.model_dump(mode="json") for j in out.judgments] for out in outs]


async def test_the_reference_judge_judges_the_same_over_either_client(
    served: tuple[Recording, str],
) -> None:
    fake, url = served
    lean = await judged(OpenAICompatBackend(base_url=url, model="m"))
    lean_bodies = [json.dumps(b, sort_keys=True) for b in fake.bodies]
    assert fake.agents and all(a == "rubricate" for a in fake.agents)  # the lean client
    fake.bodies.clear()
    over_httpx = await judged(
        OpenAICompatBackend(
            base_url="http://fake/v1", model="m", transport=httpx.ASGITransport(app=fake.app)
        )
    )
    assert lean == over_httpx
    assert len(lean_bodies) == 8 * len(RUBRICS)
    assert sorted(lean_bodies) == sorted(json.dumps(b, sort_keys=True) for b in fake.bodies)
    # every judgment read from its own prompt's answer (p(yes) differs by prompt)
    assert len({str(j["expected_score"]) for out in lean for j in out}) > len(RUBRICS)


async def test_a_connection_the_server_closed_while_idle_costs_no_failure(
    served: tuple[Recording, str],
) -> None:
    """uvicorn closes a connection idle for its keep-alive timeout (1 s here): the next
    call goes on a new connection, with no error and no retry."""
    fake, url = served
    backend = OpenAICompatBackend(base_url=url, model="m")
    messages = [Message("user", "Is water wet? Reply yes or no.")]
    first = await backend.score_choices(messages, reply_prefix="", choices=("yes", "no"))
    await asyncio.sleep(1.5)
    again = await backend.score_choices(messages, reply_prefix="", choices=("yes", "no"))
    await backend.aclose()
    assert first.logprobs == again.logprobs and len(fake.bodies) == 2


async def test_a_completion_and_its_failures_read_as_over_httpx(
    served: tuple[Recording, str],
) -> None:
    _, url = served
    backend = OpenAICompatBackend(base_url=url, model="m", timeout_s=5)
    completion = await backend.complete([Message("user", "Say yes.")], GenerationParams())
    assert completion.text in ("yes", "no") and completion.prompt_tokens > 0
    await backend.aclose()
    gone = OpenAICompatBackend(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=5)
    with pytest.raises(TransportError, match=r"cannot reach .*ConnectError"):
        await gone.complete([Message("user", "x")], GenerationParams())
    await gone.aclose()
