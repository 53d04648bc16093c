"""Choice scoring on the OpenAI-compatible backend, against a FAKE server (fake_openai.py):
reading the first token's alternatives, the request it sends, a reply prefix only where the
server continues one, and the start-up check that finds a server without log-probabilities
(the choices designs then fall back to generate, or an explicit choices design stops)."""

import logging
import math
from collections.abc import Iterator

import httpx
import pytest

from rubricate.llm.base import Message
from rubricate.llm.errors import BackendRequestError
from rubricate.llm.openai_compat import (
    OpenAICompatBackend,
    choice_logprobs,
    first_token_alternatives,
)
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.nuggets.verifier.routes import SERVICE_NAME as NUGGETS
from rubricate.verifier.app import create_app
from rubricate_client.errors import DomainError
from tests.support.servers import serve_app

from .fake_openai import FakeOpenAIServer

MESSAGES = [Message("system", "Grade."), Message("user", "Does it cite sources? Reply yes or no.")]


def response(top: list[tuple[str, float]] | None) -> dict[str, object]:
    logprobs = None
    if top is not None:
        content = [{"token": "x", "logprob": -0.1, "top_logprobs": []}]
        content[0]["top_logprobs"] = [{"token": t, "logprob": v} for t, v in top]
        logprobs = {"content": content}
    return {
        "choices": [{"message": {"content": "x"}, "logprobs": logprobs}],
        "usage": {"prompt_tokens": 42},
    }


def test_first_token_alternatives_keep_the_likelier_of_equal_texts() -> None:
    top, prompt_tokens = first_token_alternatives(
        response([("yes", -0.5), ("no", -1.5), ("yes", -3.0)])
    )
    assert top == {"yes": -0.5, "no": -1.5} and prompt_tokens == 42


@pytest.mark.parametrize("top", [None, []])
def test_no_log_probabilities_is_none(top: list[tuple[str, float]] | None) -> None:
    assert first_token_alternatives(response(top))[0] is None


def test_a_choice_is_read_at_the_longest_alternative_it_starts_with() -> None:
    top = {"not": -1.0, "no": -0.2, "partial": -2.0, "support": -0.7, "n": -4.0}
    out = choice_logprobs(top, ["support", "partial_support", "not_support"])
    assert out == {"support": -0.7, "partial_support": -2.0, "not_support": -1.0}


def test_a_choice_outside_the_alternatives_gets_the_smallest_listed_value() -> None:
    out = choice_logprobs({"yes": -0.1, "Yes": -2.5, "The": -6.0}, ["yes", "no"])
    assert out == {"yes": -0.1, "no": -6.0}  # an upper bound on p(no)


def test_choices_read_from_one_token_are_refused() -> None:
    with pytest.raises(BackendRequestError, match="share their first token"):
        choice_logprobs({"no": -0.3, "yes": -1.0}, ["no", "nope"])


def backend_for(fake: FakeOpenAIServer, **kwargs: object) -> OpenAICompatBackend:
    return OpenAICompatBackend(
        base_url="http://fake/v1",
        transport=httpx.ASGITransport(app=fake.app),
        **kwargs,  # type: ignore[arg-type]
    )


async def test_score_choices_asks_for_one_token_and_its_alternatives() -> None:
    fake = FakeOpenAIServer(p_yes=lambda _: 0.8)
    backend = backend_for(fake, top_logprobs=7)
    scores = await backend.score_choices(MESSAGES, reply_prefix="", choices=("yes", "no"))
    await backend.aclose()
    assert scores.logprobs == pytest.approx({"yes": math.log(0.8), "no": math.log(0.2 * 0.9)})
    assert scores.prompt_tokens > 0 and scores.backend == "openai"
    body = fake.bodies[-1]
    assert body["max_tokens"] == 1 and body["temperature"] == 0.0
    assert body["logprobs"] is True and body["top_logprobs"] == 7
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "continue_final_message" not in body


async def test_a_reply_prefix_needs_a_server_that_continues_it() -> None:
    fake = FakeOpenAIServer()
    backend = backend_for(fake)
    with pytest.raises(BackendRequestError, match="CONTINUE_FINAL_MESSAGE"):
        await backend.score_choices(MESSAGES, reply_prefix='["', choices=("support", "not"))
    assert fake.bodies == []  # refused before sending anything
    await backend.aclose()

    vllm_like = backend_for(fake, continue_final_message=True)
    assert vllm_like.supports_reply_prefix
    await vllm_like.score_choices(MESSAGES, reply_prefix='["', choices=("yes", "no"))
    await vllm_like.aclose()
    body = fake.bodies[-1]
    assert body["messages"][-1] == {"role": "assistant", "content": '["'}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False


async def test_score_choices_without_log_probabilities_is_rejected() -> None:
    backend = backend_for(FakeOpenAIServer(logprobs=False))
    assert await backend.choice_scoring_problem() == (
        "the server at http://fake/v1 returned no log-probabilities (logprobs/top_logprobs)"
    )
    with pytest.raises(BackendRequestError, match="no log-probabilities"):
        await backend.score_choices(MESSAGES, reply_prefix="", choices=("yes", "no"))
    await backend.aclose()


@pytest.fixture
def no_logprobs_url() -> Iterator[str]:
    with serve_app(FakeOpenAIServer(logprobs=False).app) as port:
        yield f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def logprobs_url() -> Iterator[str]:
    with serve_app(FakeOpenAIServer(logprobs=True).app) as port:
        yield f"http://127.0.0.1:{port}/v1"


def served(url: str) -> LLMSettings:
    return LLMSettings(backend="openai", base_url=url, cache="off", max_retries=0)


async def test_start_up_finds_a_server_without_log_probabilities(
    no_logprobs_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(llm=served(no_logprobs_url))
    with caplog.at_level(logging.ERROR, logger="rubricate.llm.server"):
        async with app.router.lifespan_context(app):
            assert app.state.stage_scoring.design == "generate"
            assert getattr(app.state, NUGGETS).design == "generate"
    lines = [r.getMessage() for r in caplog.records if r.name == "rubricate.llm.server"]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "returned no log-probabilities" in lines[0] and no_logprobs_url in lines[0]


async def test_an_explicit_choices_design_without_log_probabilities_stops_the_server(
    no_logprobs_url: str,
) -> None:
    app = create_app(llm=served(no_logprobs_url), tasks=TaskSettings(scoring_design="choices"))
    with pytest.raises(DomainError, match="SCORING_DESIGN=choices") as info:
        async with app.router.lifespan_context(app):
            pass
    assert info.value.field == "scoring_design"


async def test_a_server_with_log_probabilities_can_have_the_choices_design(
    logprobs_url: str,
) -> None:
    app = create_app(llm=served(logprobs_url))
    async with app.router.lifespan_context(app):
        assert app.state.stage_scoring.design == "generate"  # auto on a served backend (measured)
    app = create_app(llm=served(logprobs_url), tasks=TaskSettings(scoring_design="choices"))
    async with app.router.lifespan_context(app):
        assert app.state.stage_scoring.design == "choices"
        # nugget choices read after the reply prefix `["`: not without continue_final_message
        assert getattr(app.state, NUGGETS).design == "generate"
