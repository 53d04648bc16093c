"""The real embedded model: Qwen2.5-Coder-1.5B joined from its weight packages (slow)."""

import asyncio
import json
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, Field

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams, Message
from rubricate.llm.calls import complete_structured
from rubricate.llm.model_files import QWEN_CODER_1_5B, resolve_model_path
from rubricate.llm.settings import LLMSettings
from rubricate.stagewise.prompts import scoring as stage_scoring

from .conftest import LLAMA_CPP_ERROR

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(LLAMA_CPP_ERROR is not None, reason=LLAMA_CPP_ERROR or ""),
]

if LLAMA_CPP_ERROR is None:
    from rubricate.llm.embedded import EmbeddedBackend


class Capital(BaseModel):
    country: str
    capital: str
    confidence: int = Field(ge=0, le=2)


@pytest.fixture(scope="module")
def qwen() -> Iterator["EmbeddedBackend"]:
    backend = EmbeddedBackend.from_settings(LLMSettings(n_ctx=4096))
    yield backend
    asyncio.run(backend.aclose())


def test_the_default_model_is_the_verified_joined_file() -> None:
    path = resolve_model_path(LLMSettings())
    assert path.name == QWEN_CODER_1_5B.filename
    assert path.stat().st_size == QWEN_CODER_1_5B.size


async def test_schema_valid_json(qwen: "EmbeddedBackend") -> None:
    assert qwen.model == "qwen2.5-coder-1.5b"
    usage = Usage()
    answer = await complete_structured(
        qwen,
        [
            Message("system", "Answer with JSON only."),
            Message("user", "What is the capital of France? Give confidence 0, 1 or 2."),
        ],
        output=Capital,
        params=GenerationParams(max_tokens=80),
        usage=usage,
        task="test-qwen",
    )
    assert answer.capital.strip().lower() == "paris"
    assert usage.calls == 1 and usage.completion_tokens > 5


async def test_a_judge_score_sheet(qwen: "EmbeddedBackend") -> None:
    usage = Usage()
    sheet = await complete_structured(
        qwen,
        [
            Message("system", stage_scoring.SYSTEM),
            Message(
                "user",
                "Question:\n<untrusted>What is 2+2?</untrusted>\n\nTrajectory:\n"
                '<untrusted stage="answer">\nThe answer is 5.\n</untrusted>\n\nRubrics:\n'
                "1. (answer) [POSITIVE] Correct result: states that 2+2 equals 4.\n"
                "2. (answer) [NEGATIVE] Arithmetic error: states a wrong sum.\n"
                '\nReturn JSON {"scores": [...]} with exactly 2 items, one per rubric number '
                "1..2, each {index, justification, score}.",
            ),
        ],
        output=stage_scoring.ScoreSheet,
        params=GenerationParams(max_tokens=300),
        usage=usage,
        task="test-qwen-sheet",
        validate=lambda s: stage_scoring.check_sheet(s, n_rubrics=2),
    )
    assert sorted(item.index for item in sheet.scores) == [1, 2]
    assert all(0 <= item.score <= 2 and item.justification for item in sheet.scores)
    assert usage.calls in (1, 2) and usage.prompt_tokens > 200


async def test_closing_cuts_a_generation_in_flight_short_and_it_is_no_result() -> None:
    """A service stopping (a test's platform, a pod's SIGTERM) does not wait out a long
    background call: the generation stops at its next token and fails; nothing partial is
    returned as if it were an answer."""
    from rubricate.llm.errors import BackendRequestError

    backend = EmbeddedBackend.from_settings(LLMSettings(n_ctx=2048))
    call = asyncio.create_task(
        backend.complete(
            [Message("user", "Count from 1 to 500, one number per line.")],
            GenerationParams(max_tokens=1500),
        )
    )
    await asyncio.sleep(3.0)  # well into the call: 1,500 tokens take minutes on CPU
    await backend.aclose()
    assert call.done()  # closing waited for the call to stop, not to finish
    with pytest.raises(BackendRequestError, match="closed during the call"):
        await call
    assert not await backend.ready()


async def test_greedy_under_a_grammar_decodes_as_llama_cpp_pythons_own_sampler(
    qwen: "EmbeddedBackend",
) -> None:
    """The fast greedy path (`llm.greedy_grammar`: the likeliest tokens checked first) gives
    the tokens llama-cpp-python's sampler chain gives when it checks the whole vocabulary."""
    from rubricate.llm.embedded import llama_grammar, prompt_tokens
    from rubricate.llm.structured import json_schema_for

    messages = [
        Message("system", "Answer with JSON only."),
        Message("user", "Name two capitals of Europe, with your confidence 0, 1 or 2 each."),
    ]
    schema = {"type": "array", "items": json_schema_for(Capital), "minItems": 2, "maxItems": 2}
    fast = await qwen.complete(
        messages, GenerationParams(max_tokens=120, temperature=0.0, json_schema=schema)
    )
    from llama_cpp.llama import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from rubricate.llm.embedded import enumerate_small_int_ranges

    llm = Llama(model_path=str(qwen.model_path), n_ctx=1024, verbose=False)
    try:
        formatter = Jinja2ChatFormatter(
            template=llm.metadata["tokenizer.chat_template"], eos_token="<|im_end|>", bos_token=""
        )
        gbnf = json_schema_to_gbnf(json.dumps(enumerate_small_int_ranges(schema)))
        reference = llm.create_completion(
            prompt=prompt_tokens(llm, formatter, messages),
            grammar=llama_grammar(gbnf),
            temperature=0.0,
            max_tokens=120,
            stop=["<|im_end|>"],
            repeat_penalty=1.0,
        )
    finally:
        llm.close()
    assert fast.text == reference["choices"][0]["text"]  # type: ignore[index]
    assert fast.completion_tokens == reference["usage"]["completion_tokens"]  # type: ignore[index]
