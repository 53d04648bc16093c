"""`GROUP_STAGE_SCORES`: a group's trajectories scored in one call, each as `STAGE_SCORES`
scores it alone; a trajectory whose judge call fails gets the error its own call would have
answered, the others their judgments. The verifier app runs in process on the FAKE judge
(`testing.fake_judge`, named as a fake); the caller is the platform's `ServiceClient`.
The answer's assertion-unit reading is off here: its model calls would mix into the calls
these tests count (it has its own tests: tests/stagewise/verifier/test_units.py)."""

from collections.abc import AsyncIterator

import httpx
import pytest

from rubricate.common.upstream import ServiceClient
from rubricate.common.usage import Usage
from rubricate.core.rubrics import make_rubric
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.stagewise.verifier.endpoints import GROUP_STAGE_SCORES, STAGE_SCORES
from rubricate.stagewise.verifier.schemas import (
    GroupStageScoresRequest,
    GroupTrajectory,
    StageScoresRequest,
)
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.verifier.app import create_app
from rubricate_client.schemas.rubrics import RubricSpec

RUBRICS = [
    make_rubric(
        spec=RubricSpec(title=f"{stage} rubric", description="d"), stage=stage, origin="active"
    )
    for stage in ("plan", "research", "review", "answer")
]


def stages(marker: str) -> dict[str, str | None]:
    return {
        "plan": f"plan {marker}",
        "research": None,
        "review": "review",
        "answer": f"ans {marker}",
    }


@pytest.fixture
async def verifier() -> AsyncIterator[tuple[ServiceClient, FakeJudgeBackend]]:
    backend = FakeJudgeBackend()
    llm = LLMSettings(max_retries=1, backoff_base_s=0.001, backoff_max_s=0.002)
    app = create_app(
        backend=backend, llm=llm, tasks=TaskSettings(scoring_design="generate", unit_reading="off")
    )
    async with app.router.lifespan_context(app):
        client = ServiceClient(
            service="verifier",
            base_url="http://verifier",
            timeout_s=30,
            retries=0,
            transport=httpx.ASGITransport(app=app),
        )
        try:
            yield client, backend
        finally:
            await client.aclose()


async def test_each_trajectory_gets_what_its_own_call_gets(
    verifier: tuple[ServiceClient, FakeJudgeBackend],
) -> None:
    client, _ = verifier
    markers = ["[[excellent]]", "[[poor]]", ""]
    subsets = [[0, 1, 2, 3], [3], [0, 3]]
    group = await client.call(
        GROUP_STAGE_SCORES,
        GroupStageScoresRequest(
            question="q?",
            rubrics=RUBRICS,
            trajectories=[
                GroupTrajectory(stages=stages(m), rubrics=s)  # type: ignore[arg-type]
                for m, s in zip(markers, subsets, strict=True)
            ],
        ),
    )
    usage = Usage()
    for marker, subset, result in zip(markers, subsets, group.trajectories, strict=True):
        alone = await client.call(
            STAGE_SCORES,
            StageScoresRequest(
                question="q?",
                stages=stages(marker),  # type: ignore[arg-type]
                rubrics=[RUBRICS[k] for k in subset],
            ),
        )
        usage.merge(alone.usage)
        assert result.error is None and result.status is None
        assert result.judgments == alone.judgments
    assert [len(r.judgments or []) for r in group.trajectories] == [4, 1, 2]
    assert group.usage.calls == usage.calls == 3
    assert group.usage.prompt_tokens == usage.prompt_tokens


async def test_a_failed_trajectory_carries_its_error_and_the_others_their_judgments(
    verifier: tuple[ServiceClient, FakeJudgeBackend],
) -> None:
    client, backend = verifier
    out = await client.call(
        GROUP_STAGE_SCORES,
        GroupStageScoresRequest(
            question="q?",
            rubrics=RUBRICS,
            trajectories=[
                GroupTrajectory(stages=stages("[[fail-all]]"), rubrics=[0, 3]),  # type: ignore[arg-type]
                GroupTrajectory(stages=stages("[[poor]]"), rubrics=[3]),  # type: ignore[arg-type]
            ],
        ),
    )
    failed, scored = out.trajectories
    assert failed.judgments is None and failed.status == 503
    assert failed.error is not None and failed.error.type == "backend_unavailable"
    assert failed.error.message.startswith("stage_scoring: ")
    assert failed.error.usage is not None
    assert scored.error is None and [j.score for j in scored.judgments or []] == [0]
    # the failed trajectory's attempts (a first try and one retry) count in the call's usage
    scoring_calls = [c for c in backend.calls if c[0] == "score_sheet"]
    assert len(scoring_calls) == 3


async def test_a_rubric_index_out_of_range_is_a_422_that_says_where() -> None:
    app = create_app(
        backend=FakeJudgeBackend(),
        tasks=TaskSettings(scoring_design="generate", unit_reading="off"),
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://verifier") as c:
            body = {
                "question": "q?",
                "rubrics": [r.model_dump(mode="json") for r in RUBRICS],
                "trajectories": [
                    {"stages": stages(""), "rubrics": [0]},
                    {"stages": stages(""), "rubrics": [1, 4]},
                ],
            }
            response = await c.post(GROUP_STAGE_SCORES.path, json=body)
    assert response.status_code == 422
    assert "trajectories[1].rubrics: [4] out of range for 4 rubrics" in response.text
