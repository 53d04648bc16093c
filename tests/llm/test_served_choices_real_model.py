"""Choice scoring on a served backend: log-probabilities read from a real llama.cpp
OpenAI-compatible server (`python -m llama_cpp.server`, SmolLM2-135M) match the ones the
embedded backend reads from the same model file in process. Real model: run under the lock
(`flock /tmp/rubricate-model.lock pytest -m model tests/llm/test_served_choices_real_model.py`)."""

import math
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rubricate.llm.base import Message
from rubricate.llm.embedded import EmbeddedBackend
from rubricate.llm.openai_compat import OpenAICompatBackend

from .conftest import LLAMA_CPP_ERROR, LLAMA_SERVER_N_CTX

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(LLAMA_CPP_ERROR is not None, reason=LLAMA_CPP_ERROR or ""),
]

QUESTION = [
    Message("system", "You answer questions with Yes or No only."),
    Message("user", "Is the sky blue on a clear day? Answer Yes or No."),
]
CHOICES = ("Yes", "No")


@pytest.fixture
async def served(llama_server: str) -> AsyncIterator[OpenAICompatBackend]:
    backend = OpenAICompatBackend(base_url=llama_server, timeout_s=120)
    yield backend
    await backend.aclose()


async def test_the_server_returns_log_probabilities(served: OpenAICompatBackend) -> None:
    assert await served.choice_scoring_problem() is None


async def test_served_choice_logprobs_match_the_embedded_backend(
    served: OpenAICompatBackend, smollm2_path: Path
) -> None:
    scores = await served.score_choices(QUESTION, reply_prefix="", choices=CHOICES)
    embedded = EmbeddedBackend(model_path=smollm2_path, n_ctx=LLAMA_SERVER_N_CTX, n_threads=2)
    try:
        reference = await embedded.score_choices(QUESTION, reply_prefix="", choices=CHOICES)
    finally:
        await embedded.aclose()
    assert scores.backend == "openai" and scores.prompt_tokens == reference.prompt_tokens
    for choice in CHOICES:
        assert math.isfinite(scores.logprobs[choice]) and scores.logprobs[choice] <= 0
        # same model, same prompt tokens: the same distribution up to float noise
        assert scores.logprobs[choice] == pytest.approx(reference.logprobs[choice], abs=0.05)
    p_served = math.exp(scores.logprobs["Yes"]) / sum(math.exp(v) for v in scores.logprobs.values())
    p_embedded = math.exp(reference.logprobs["Yes"]) / sum(
        math.exp(v) for v in reference.logprobs.values()
    )
    assert p_served == pytest.approx(p_embedded, abs=0.01)
