"""The gateway's hand-over of a scored group: built from the scoring's validated parts
without validating them again and serialized once, it is, as the miner reads it, the
submission that validating every part would build."""

from typing import Any

from rubricate.audit.gateway.service import submission
from rubricate.audit.miner.schemas import AuditRollout, AuditSubmission
from rubricate_client.schemas.rubrics import Rubric
from rubricate_client.schemas.stagewise import StagewiseScoreRequest, StagewiseScoreResponse
from tests.support.gateway import trajectory

STAGES = ("plan", "research", "review", "answer")


def rubric(stage: str, n: int) -> dict[str, Any]:
    return {
        "id": f"r-{stage}-{n}",
        "stage": stage,
        "title": f"{stage} rubric {n}",
        "description": f"The {stage} stage does thing {n}.",
        "polarity": "negative" if n == 2 else "positive",
        "weight": n,
        "origin": "persistent" if n == 1 else "active",
    }


def scored() -> tuple[StagewiseScoreRequest, StagewiseScoreResponse]:
    request = StagewiseScoreRequest.model_validate(
        {
            "question": "Which sources?",
            "step": 7,
            "rollouts": [
                {"id": f"o{i}", "trajectory": trajectory(f"answer {i} [[excellent]]")}
                for i in range(3)
            ],
        }
    )
    rubrics = {s: [rubric(s, 1), rubric(s, 2)] for s in STAGES}
    judgments = [
        {
            "rubric_id": r["id"],
            "stage": r["stage"],
            "score": 2,
            "justification": "cites two sources",
            "expected_score": 1.75,
            "evidence": ["u1"] if r["stage"] == "answer" else [],
        }
        for rs in rubrics.values()
        for r in rs
    ]
    spans = {"plan": [0, 10], "research": [10, 20], "review": None, "answer": [20, 30]}
    rollouts = [
        {  # scored
            "id": "o0",
            "spans": spans,
            "missing_stages": ["review"],
            "scores": {"plan": 2.0, "research": 1.0, "review": None, "answer": 0.5},
            "returns": None,
            "advantages": None,
            "judgments": judgments,
        },
        {  # the answer score broadcast
            "id": "o1",
            "spans": spans,
            "missing_stages": ["review"],
            "scores": {"plan": 1.0, "research": 1.0, "review": None, "answer": 1.0},
            "returns": None,
            "advantages": None,
            "judgments": judgments[-2:],
            "fallback": {"kind": "answer_only", "reason": "the stage scoring failed"},
        },
        {  # not scored
            "id": "o2",
            "spans": {s: None for s in STAGES},
            "missing_stages": list(STAGES),
            "scores": None,
            "returns": None,
            "advantages": None,
            "judgments": [],
            "fallback": {"kind": "unscored", "reason": "no score"},
        },
    ]
    response = StagewiseScoreResponse.model_validate(
        {
            "question_id": "q-1",
            "scoring_id": "sc_1",
            "mode": "stagewise",
            "lambda": [[1.0]],
            "rollouts": rollouts,
            "rubrics": rubrics,
            "pruned": [],
            "generation": {"status": "ok"},
            "unscored_stages": [],
            "usage": {},
            "timing": {"total_s": 0, "upstream_s": 0, "overhead_s": 0},
        }
    )
    return request, response


def validated(request: StagewiseScoreRequest, response: StagewiseScoreResponse) -> AuditSubmission:
    """The submission with every part validated again (how the hand-over was built)."""
    return AuditSubmission(
        scoring_id=response.scoring_id or "",
        question_id=response.question_id,
        question=request.question,
        step=request.step,
        rubrics=[
            Rubric.model_validate(r, from_attributes=True)
            for rs in response.rubrics.values()
            for r in rs
        ],
        rollouts=[
            AuditRollout(
                id=result.id,
                trajectory=rollout.trajectory,
                spans=result.spans,
                scores=result.scores,
                judgments=result.judgments,
                fallback=None if result.fallback is None else result.fallback.kind,
            )
            for rollout, result in zip(request.rollouts, response.rollouts, strict=True)
        ],
    )


def test_the_hand_over_is_what_validating_every_part_builds() -> None:
    request, response = scored()
    sent = submission(request, response).model_dump_json()
    received = AuditSubmission.model_validate_json(sent)
    assert received == validated(request, response)
    assert received.rollouts[1].fallback == "answer_only"
    assert received.rollouts[2].scores is None
    assert {r.origin for r in received.rubrics} == {"persistent", "active"}


def test_a_scoring_the_store_could_not_keep_gets_an_audit_id_of_its_own() -> None:
    request, response = scored()
    unstored = response.model_copy(update={"scoring_id": None})
    sent = AuditSubmission.model_validate_json(submission(request, unstored).model_dump_json())
    assert sent.scoring_id.startswith("au_")
