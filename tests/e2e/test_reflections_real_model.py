"""Reflection judging end to end on the real embedded model (Qwen2.5-Coder-1.5B Q4_K_M on
CPU) and the real MiniLM embedder: slow."""

from pathlib import Path

import httpx
import pytest

from rubricate.embedded import SERVICES, EmbeddedPlatform

pytestmark = pytest.mark.model

QUESTION = "Why was NASA's Mars Climate Orbiter lost in 1999?"
TRAJECTORY = (
    "<think>Find the official cause.</think><structured_plan>1. Search the failure report. "
    "2. Answer with the root cause.</structured_plan>\n"
    '<call_tool name="search">Mars Climate Orbiter failure cause</call_tool>'
    "<tool_output>A blog says a fuel line ruptured during orbit insertion.</tool_output>\n"
    "<think>One source is enough.</think><review>No gaps.</review>\n"
    "<answer>The orbiter was lost because a fuel line ruptured.</answer>"
)
JUDGMENTS = {
    "scores": {"plan": 0.5, "research": 0.0, "review": 0.0, "answer": 0.0},
    "judgments": [
        {
            "rubric_id": "r_cause",
            "stage": "answer",
            "score": 0,
            "justification": "Says a fuel line ruptured; the board found a unit mismatch "
            "(pound-force seconds vs newton seconds).",
        },
        {
            "rubric_id": "r_sources",
            "stage": "research",
            "score": 0,
            "justification": "Relied on one blog instead of the investigation board report.",
        },
    ],
    "rubrics": {
        "answer": [
            {
                "id": "r_cause",
                "stage": "answer",
                "title": "Names the unit mismatch",
                "description": "States that imperial and metric units were mixed up.",
                "weight": 3,
                "polarity": "positive",
                "origin": "active",
            }
        ],
        "research": [
            {
                "id": "r_sources",
                "stage": "research",
                "title": "Uses the primary report",
                "description": "Consults the mishap investigation board report.",
                "weight": 2,
                "polarity": "positive",
                "origin": "active",
            }
        ],
    },
}
SPECIFIC = """<reflection_rubrics>
Critical Requirement:
- Name the board's root cause: impulse in pound-force seconds read as newton seconds.
Analytical Approach:
- Search for the investigation board report and confirm the cause there before answering.
Communication & Structure:
- State the cause first, then how the navigation error accumulated.
Pitfalls:
- Trusting a single blog; the fuel-line story is not in the report.
</reflection_rubrics>
<reflection_takeaways>
1. For spacecraft failures, find the official investigation report before answering.
2. When one source disagrees with the known record, look for a second, primary source.
</reflection_takeaways>"""
GENERIC = """<reflection_rubrics>
Critical Requirement:
- Answer the question.
Analytical Approach:
- Be thorough.
Communication & Structure:
- Be clear.
Pitfalls:
- Be careful.
</reflection_rubrics>
<reflection_takeaways>
- Do better research.
</reflection_takeaways>"""


async def test_reflections_are_judged_and_the_best_enters_the_bank(tmp_path: Path) -> None:
    platform = EmbeddedPlatform(data_dir=tmp_path, ports=dict.fromkeys(SERVICES, 0))
    async with platform, httpx.AsyncClient(timeout=1800) as client:
        gateway = platform.urls["gateway"]
        response = await client.post(
            f"{gateway}/v1/reflections/score",
            json={
                "question": QUESTION,
                "trajectory": TRAJECTORY,
                "judgments": JUDGMENTS,
                "candidates": [SPECIFIC, GENERIC, "The answer was wrong."],
                "step": 1,
            },
        )
        assert response.status_code == 200, response.text
        out = response.json()
        within = await client.post(
            f"{gateway}/v1/bank/retrieve", json={"question": QUESTION, "mode": "within"}
        )
    specific, generic, malformed = out["candidates"]
    assert malformed["status"] == "invalid_format" and malformed["u"] == 0.0
    for c in (specific, generic):
        assert c["status"] == "scored", c
        assert 0.0 <= c["u"] <= 1.0
        assert c["u"] == pytest.approx((c["u_within"] + c["u_cross"]) / 2)
    assert out["usage"]["calls"] >= 2 and out["usage"]["completion_tokens"] > 20
    # deterministic decoding: the specific, evidence-grounded reflection must beat the generic
    assert specific["u"] > generic["u"]
    assert out["best_index"] == 0 and out["bank"]["written"]
    stored = within.json()
    assert [i["question"] for i in stored["items"]] == [QUESTION]
    assert stored["items"][0]["reflection"] == [SPECIFIC, GENERIC][out["best_index"]]
    assert "## Your Previous Attempt on This Question:" in stored["block"]
    print("u specific", specific["u"], "generic", generic["u"], specific["rationale"])
