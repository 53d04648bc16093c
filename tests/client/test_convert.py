"""Pydantic wire models <-> proto messages: every endpoint's request and response round-trip
through its generated message unchanged, and drift between the two fails loudly."""

from typing import Any

import pytest
from pydantic import BaseModel

from rubricate_client.convert import (
    ProtoMismatch,
    json_to_message,
    message_to_model,
    model_to_message,
)
from rubricate_client.endpoints import (
    ENDPOINTS,
    GET_BUFFER,
    GET_REWARD,
    STAGEWISE_ADVANTAGES,
    STAGEWISE_SCORE,
    Endpoint,
)
from rubricate_client.protos import endpoint_types
from rubricate_client.schemas.rubrics import Judgment
from rubricate_client.v1 import common_pb2

STAGES = ("plan", "research", "review", "answer")
RUBRIC = {
    "id": "r_1",
    "stage": "answer",
    "title": "Names the unit mismatch",
    "description": "Says pound-force vs newton.",
    "weight": 3,
    "polarity": "positive",
    "origin": "persistent",
}

SCORE_RESPONSE: dict[str, Any] = {
    "question_id": "q1",
    "scoring_id": None,
    "mode": "stagewise",
    "lambda": [[1.0, 0.4, 0.6, 0.8], [0.0, 1.0, 0.4, 0.8], [0.0, 0.0, 1.0, 0.8], [0, 0, 0, 1]],
    "rollouts": [
        {
            "id": "a",
            "spans": {"plan": [0, 10], "research": None, "review": [12, 20], "answer": [20, 30]},
            "missing_stages": ["research"],
            "scores": {"plan": 1.0, "research": 0.0, "review": 0.5, "answer": 1.0},
            "returns": {"plan": 2.1, "research": 1.2, "review": 1.3, "answer": 1.0},
            "advantages": {"plan": 0.7, "research": -0.1, "review": 0.0, "answer": 1.0},
            "judgments": [
                {"rubric_id": "r_1", "stage": "answer", "score": 2, "justification": "ok"}
            ],
            "fallback": {"kind": "answer_only", "reason": "verifier timed out"},
        },
        {
            "id": "b",
            "spans": dict.fromkeys(STAGES),
            "missing_stages": list(STAGES),
            "scores": None,
            "returns": None,
            "advantages": None,
            "judgments": [],
            "fallback": {"kind": "unscored", "reason": "no stage"},
        },
    ],
    "rubrics": {"plan": [], "research": [], "review": [], "answer": [RUBRIC]},
    "pruned": ["r_0"],
    "generation": {"status": "failed", "new_rubric_ids": [], "error": "503"},
    "unscored_stages": ["plan"],
    "usage": {"calls": 3, "prompt_tokens": 100, "completion_tokens": 7, "latency_s": 0.5},
    "timing": {"total_s": 1.0, "upstream_s": 0.9, "overhead_s": 0.1},
}

EXAMPLES: list[tuple[Endpoint[Any, Any], dict[str, Any], dict[str, Any]]] = [
    (
        STAGEWISE_SCORE,
        {
            "question": "Why?",
            "question_id": "q1",
            "rollouts": [{"id": "a", "trajectory": "<answer>x</answer>"}],
            "persistent_rubrics": [{"title": "T", "description": "D", "weight": 1}],
            "lambda": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
            "mode": "terminal",
            "evolve": False,
            "step": 0,
            "caps": {"plan": 0, "answer": 5},
            "missing_stage_score": 0.25,
        },
        SCORE_RESPONSE,
    ),
    (
        STAGEWISE_ADVANTAGES,
        {"scores": [[1, 0.5, 0, 1], [0, 0, 0, 0]], "mode": "stagewise"},
        {"returns": [[1.0, 2.0, 3.0, 4.0]], "advantages": [[-0.5, 0.0, 0.5, 1.0]]},
    ),
    (
        GET_BUFFER,
        {},
        {
            "question_id": "q1",
            "question": "Why?",
            "version": 3,
            "updated_at": "2026-11-22T12:00:00Z",
            "rubrics": {
                "plan": [],
                "research": [],
                "review": [],
                "answer": [{**RUBRIC, "created_step": 4, "variance": 0.25}],
            },
        },
    ),
    (
        GET_REWARD,
        {
            "query": ["p1 r1", "p2 r2", "p3 r3"],
            "prompts": ["p1", "p2", "p3"],
            "labels": [
                '{"question": "q"}',
                {"nuggets": [{"text": "n", "importance": "vital"}]},
                None,
            ],
            "kind": "stagewise",
        },
        {
            "rewards": [0.5, 0.0, 1.0],
            "scores": [0.5, 0.0, 1.0],
            "extra_logs": {"rubricate/scored": [1.0, 0.0, 1.0]},
        },
    ),
]


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True)


@pytest.mark.parametrize(("endpoint", "request_json", "response_json"), EXAMPLES)
def test_request_and_response_round_trip(
    endpoint: Endpoint[Any, Any], request_json: dict[str, Any], response_json: dict[str, Any]
) -> None:
    request_cls, response_cls = endpoint_types(endpoint)
    response = endpoint.response.model_validate(response_json)
    wire = response_cls.FromString(model_to_message(response, response_cls).SerializeToString())
    assert _dump(message_to_model(wire, endpoint.response)) == _dump(response)
    if endpoint.has_body:
        request = endpoint.request.model_validate(request_json)
        message = json_to_message(_dump(request), request_cls)
        assert message_to_model(message, endpoint.request) == request


def test_unset_optional_request_fields_take_the_http_defaults() -> None:
    request_cls, _ = endpoint_types(STAGEWISE_SCORE)
    minimal = {"question": "Why?", "rollouts": [{"id": "a", "trajectory": "t"}]}
    message = json_to_message(minimal, request_cls)
    decoded = message_to_model(message, STAGEWISE_SCORE.request)
    assert decoded == STAGEWISE_SCORE.request.model_validate(minimal)
    assert decoded.evolve is True and decoded.mode == "stagewise" and decoded.caps is None


def test_every_rpc_endpoint_has_generated_messages() -> None:
    for endpoint in ENDPOINTS:
        if endpoint.rpc is not None:
            request_cls, _ = endpoint_types(endpoint)
            for name in endpoint.path_params:
                assert name in request_cls.DESCRIPTOR.fields_by_name, (endpoint.name, name)


def test_a_field_missing_from_the_proto_fails_loudly() -> None:
    _, response_cls = endpoint_types(STAGEWISE_ADVANTAGES)
    with pytest.raises(ProtoMismatch, match="variances"):
        json_to_message({"returns": [[1.0]], "variances": [1.0]}, response_cls)


def test_a_value_of_the_wrong_shape_fails_loudly() -> None:
    request_cls, _ = endpoint_types(STAGEWISE_SCORE)
    with pytest.raises(ProtoMismatch, match="lambda"):
        json_to_message({"question": "q", "lambda": {"a": 1}}, request_cls)


def test_bad_values_fail_pydantic_validation_with_field_paths() -> None:
    request_cls, _ = endpoint_types(STAGEWISE_SCORE)
    message = json_to_message(
        {"question": "q", "rollouts": [{"id": "a", "trajectory": "  "}]}, request_cls
    )
    with pytest.raises(ValueError, match="trajectory"):
        message_to_model(message, STAGEWISE_SCORE.request)


def test_a_judgment_keeps_its_expected_score_and_its_absence() -> None:
    soft = Judgment(rubric_id="r_1", stage="answer", score=2, expected_score=1.37)
    plain = Judgment(rubric_id="r_1", stage="answer", score=1)
    message = model_to_message(soft, common_pb2.Judgment)
    assert message.HasField("expected_score") and message.expected_score == 1.37
    assert message_to_model(message, Judgment) == soft
    message = model_to_message(plain, common_pb2.Judgment)
    assert not message.HasField("expected_score")  # null stays unset, not 0.0
    assert message_to_model(message, Judgment).expected_score is None
