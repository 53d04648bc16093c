import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field, RootModel

from rubricate.llm.errors import OutputParseError
from rubricate.llm.structured import json_schema_for, parse_json_output
from rubricate.stagewise.prompts import rubric_generation as stage_rubrics
from rubricate.stagewise.prompts import scoring as stage_scoring

from .conftest import needs_llama_cpp


class Item(BaseModel):
    index: int = Field(ge=1)
    score: int = Field(ge=0, le=2)
    note: str = ""


class Sheet(BaseModel):
    scores: list[Item]


class Kind(BaseModel):
    label: Literal["plan", "answer"]


class Node(BaseModel):
    name: str
    children: list["Node"] = []


class Tree(BaseModel):
    root: Node


class Wrapper(BaseModel):
    item: Item = Field(description="the one item")
    maybe: Item | None = None


SHEET = {"scores": [{"index": 1, "score": 2, "note": 'a } brace and a " quote'}]}
SHEET_JSON = json.dumps(SHEET)


@pytest.mark.parametrize(
    "text",
    [
        SHEET_JSON,
        f"```json\n{SHEET_JSON}\n```",
        f"```\n{SHEET_JSON}\n```",
        f"Here is my grading:\n{SHEET_JSON}\nI hope this helps!",
        f"Scores use the scale [0-2]. {{not json}} Result: {SHEET_JSON}",
        f"```json\n{SHEET_JSON}",  # fence never closed
        '{"scores": [{"index": 1, "score": 2, "note": "a } brace and a \\" quote",},],}',
        f"```json\n{SHEET_JSON[:-2]},]}}\n```",
        f'Example: {{"scores": "not a list"}}\nActual: {SHEET_JSON}',
    ],
    ids=[
        "plain",
        "json-fence",
        "bare-fence",
        "prose-around",
        "stray-brackets-first",
        "unclosed-fence",
        "trailing-commas",
        "fenced-trailing-comma",
        "invalid-example-then-valid",
    ],
)
def test_tolerant_parsing(text: str) -> None:
    assert parse_json_output(text, Sheet).model_dump() == SHEET


def test_top_level_arrays() -> None:
    assert parse_json_output("Numbers: [1, 2, 3,] done", RootModel[list[int]]).root == [1, 2, 3]


def test_commas_inside_strings_are_kept() -> None:
    text = '{"scores": [{"index": 1, "score": 0, "note": "a, ]"}],}'
    assert parse_json_output(text, Sheet).scores[0].note == "a, ]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I cannot grade this.", "no JSON object or array found"),
        ('{"scores": [{"index": 1, "score": 2', "cut off"),
        ("{'scores': []}", "invalid JSON"),
        ("", "no JSON object or array found"),
    ],
)
def test_unparseable_output(text: str, expected: str) -> None:
    with pytest.raises(OutputParseError, match=expected) as caught:
        parse_json_output(text, Sheet)
    assert caught.value.raw == text


def test_validation_errors_name_the_field_and_value_without_urls() -> None:
    text = '{"scores": [{"index": 0, "score": 3}]}'
    with pytest.raises(OutputParseError) as caught:
        parse_json_output(text, Sheet)
    message = str(caught.value)
    assert "scores.0.index: Input should be greater than or equal to 1 (got 0)" in message
    assert "scores.0.score: Input should be less than or equal to 2 (got 3)" in message
    assert "pydantic.dev" not in message


def test_many_validation_errors_are_summarised() -> None:
    items = [{"index": 0, "score": 9} for _ in range(10)]
    with pytest.raises(OutputParseError, match="and 12 more errors"):
        parse_json_output(json.dumps({"scores": items}), Sheet)


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [k for k in node if k in ("$ref", "$defs")] + [
            r for v in node.values() for r in _refs(v)
        ]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_schema_refs_are_inlined_and_siblings_kept() -> None:
    schema = json_schema_for(Wrapper)
    assert _refs(schema) == []
    item = schema["properties"]["item"]
    assert item["description"] == "the one item"
    assert item["properties"]["score"] == {
        "maximum": 2,
        "minimum": 0,
        "title": "Score",
        "type": "integer",
    }
    assert item["required"] == ["index", "score", "note"]
    assert [o.get("type") for o in schema["properties"]["maybe"]["anyOf"]] == ["object", "null"]


def test_recursive_schemas_keep_their_defs_under_a_concrete_root() -> None:
    schema = json_schema_for(Node)
    assert "$ref" not in schema and schema["type"] == "object"
    assert set(schema["$defs"]) == {"Node"}
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert schema["required"] == schema["$defs"]["Node"]["required"] == ["name", "children"]


def test_every_property_is_required_in_declaration_order() -> None:
    schema = json_schema_for(stage_scoring.ScoreSheet)
    item = schema["properties"]["scores"]["items"]
    assert item["required"] == ["index", "justification", "evidence", "score"]
    assert json_schema_for(Wrapper)["required"] == ["item", "maybe"]
    # parsing still applies the model's defaults
    sheet = parse_json_output('{"scores": [{"index": 1, "score": 2}]}', stage_scoring.ScoreSheet)
    assert sheet.scores[0].justification == ""


def test_schemas_without_refs_are_unchanged() -> None:
    assert json_schema_for(Kind) == Kind.model_json_schema()


@needs_llama_cpp
@pytest.mark.parametrize(
    "model",
    [Sheet, Wrapper, Node, Tree, Kind, stage_rubrics.GeneratedRubrics, stage_scoring.ScoreSheet],
)
def test_llama_cpp_compiles_every_schema_to_a_grammar(model: type[BaseModel]) -> None:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    grammar = json_schema_to_gbnf(json.dumps(json_schema_for(model)))
    assert "root ::=" in grammar
