import datetime
import enum
import uuid
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams, Message
from rubricate.llm.calls import complete_structured
from rubricate.llm.errors import TransportError
from rubricate.llm.fake import FakeBackend, InstantFakeBackend, minimal_instance
from rubricate.llm.structured import json_schema_for
from rubricate.stagewise.prompts import rubric_generation as stage_rubrics
from rubricate.stagewise.prompts import scoring as stage_scoring


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Leaf(BaseModel):
    weight: int = Field(ge=3, le=10)
    ratio: float = Field(gt=0.5)
    label: str = Field(min_length=5)


class Constrained(BaseModel):
    leaves: list[Leaf] = Field(min_length=2)
    pair: tuple[int, str]
    color: Color
    kind: Literal["plan", "answer"]
    maybe: Leaf | None
    when: datetime.datetime
    day: datetime.date
    ident: uuid.UUID
    counts: dict[str, int]
    flag: bool
    tags: Annotated[list[str], Field(min_length=1, max_length=3)]
    optional_not_required: str = "default"
    below_zero: int = Field(default=0, lt=-4)


class Tree(BaseModel):
    name: str
    children: list["Tree"] = []


MODELS: list[type[BaseModel]] = [
    Constrained,
    Leaf,
    Tree,
    stage_scoring.ScoreSheet,
    stage_rubrics.GeneratedRubrics,
]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("inline", [True, False], ids=["inlined", "raw-schema"])
async def test_instant_fake_answers_schema_valid_json(model: type[BaseModel], inline: bool) -> None:
    schema = json_schema_for(model) if inline else model.model_json_schema()
    backend = InstantFakeBackend()
    completion = await backend.complete(
        [Message("user", "x")], GenerationParams(json_schema=schema)
    )
    model.model_validate_json(completion.text)
    assert completion.backend == "instant-fake" and completion.latency_s == 0.0


async def test_instant_fake_works_through_complete_structured() -> None:
    usage = Usage()
    out = await complete_structured(
        InstantFakeBackend(prompt_tokens=3, completion_tokens=4),
        [Message("user", "x")],
        output=Constrained,
        params=GenerationParams(),
        usage=usage,
        task="fake-test",
    )
    assert len(out.leaves) == 2 and out.leaves[0].weight == 3
    assert usage == Usage(calls=1, prompt_tokens=3, completion_tokens=4)


async def test_instant_fake_without_schema_answers_an_empty_object() -> None:
    completion = await InstantFakeBackend().complete([Message("user", "x")], GenerationParams())
    assert completion.text == "{}"


def test_minimal_instance_details() -> None:
    assert minimal_instance({"type": "integer", "minimum": 2.5}) == 3
    assert minimal_instance({"type": "integer", "exclusiveMinimum": 2}) == 3
    assert minimal_instance({"type": "integer", "maximum": -2}) == -2
    assert minimal_instance({"type": "number", "exclusiveMaximum": 0}) < 0
    assert minimal_instance({"type": ["null", "string"]}) == "x"
    assert minimal_instance({"const": 7}) == 7
    schema: dict[str, Any] = {"type": "array", "items": {"type": "boolean"}, "minItems": 3}
    assert minimal_instance(schema) == [False, False, False]


async def test_fake_backend_replays_its_script_and_records_calls() -> None:
    backend = FakeBackend(["one", TransportError("boom"), "three"], prompt_tokens=2)
    params = GenerationParams(max_tokens=7)
    first = await backend.complete([Message("user", "a")], params)
    with pytest.raises(TransportError, match="boom"):
        await backend.complete([Message("user", "b")], params)
    backend.push("four")
    assert (await backend.complete([Message("user", "c")], params)).text == "three"
    assert (await backend.complete([Message("user", "d")], params)).text == "four"
    with pytest.raises(AssertionError, match="no scripted reply left for call 5"):
        await backend.complete([Message("user", "e")], params)
    assert first.text == "one" and first.prompt_tokens == 2 and first.backend == "fake"
    assert [c[0][0].content for c in backend.calls] == ["a", "b", "c", "d", "e"]
    await backend.aclose()
    assert backend.closed
