"""The step endpoints on the real embedded model (Qwen2.5-Coder-1.5B Q4_K_M on CPU): slow."""

from pathlib import Path

import httpx
import pytest

from rubricate.embedded import SERVICES, EmbeddedPlatform

pytestmark = pytest.mark.model

QUESTION = "Why was NASA's Mars Climate Orbiter lost in 1999?"
HISTORY = (
    '<call_tool name="google_search">Mars Climate Orbiter loss</call_tool>'
    "<tool_output>The Mars Climate Orbiter was lost on September 23, 1999 when it entered "
    "the Martian atmosphere too low. An investigation board was convened.</tool_output>\n"
)
RELEVANT = (
    '<call_tool name="google_search">Mars Climate Orbiter investigation board report '
    "cause unit mismatch</call_tool>"
)
IRRELEVANT = '<call_tool name="google_search">best pizza restaurants in Naples</call_tool>'


async def test_rubric_verify_and_rank_with_the_embedded_model(tmp_path: Path) -> None:
    platform = EmbeddedPlatform(data_dir=tmp_path, ports=dict.fromkeys(SERVICES, 0))
    async with (
        platform,
        httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=1800) as client,
    ):
        r = await client.post(
            "/v1/steps/rubric", json={"question": QUESTION, "history": HISTORY, "k": 3}
        )
        assert r.status_code == 200, r.text
        rubric = r.json()
        assert len(rubric["criteria"]) == 3
        assert sum(c["weight"] for c in rubric["criteria"]) == pytest.approx(1.0)
        assert all(c["text"].strip() for c in rubric["criteria"])
        assert rubric["usage"]["completion_tokens"] > 10

        r = await client.post(
            "/v1/steps/verify",
            json={"question": QUESTION, "history": HISTORY, "action": RELEVANT, "rubric": rubric},
        )
        assert r.status_code == 200, r.text
        verdict = r.json()
        assert len(verdict["verdicts"]) == 3
        assert 0.0 <= verdict["score"] <= 1.0
        assert verdict["pass"] == (verdict["score"] >= 0.5)
        assert (verdict["feedback"] is None) == (verdict["score"] == 1.0)

        r = await client.post(
            "/v1/rank",
            json={
                "question": QUESTION,
                "history": HISTORY,
                "candidates": [IRRELEVANT, RELEVANT],
                "judges": 2,
                "seed": 5,
                "temperature": 0.0,
            },
        )
        assert r.status_code == 200, r.text
        ranking = r.json()
    assert ranking["dropped"] == [], ranking["judges"]
    # two judges saw the slate in different orders; both must prefer the on-topic search
    assert ranking["consensus"] == [[1], [0]], ranking["judges"]
