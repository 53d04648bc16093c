"""End to end on the real embedded model (Qwen2.5-Coder-1.5B Q4_K_M on CPU): slow."""

from pathlib import Path

import httpx
import pytest

from rubricate.demo import load_example
from rubricate.embedded import SERVICES, EmbeddedPlatform

pytestmark = pytest.mark.model


async def test_stagewise_score_with_the_embedded_model(tmp_path: Path) -> None:
    group = load_example()
    by_id = {r["id"]: r for r in group["rollouts"]}
    group["rollouts"] = [by_id["thorough"], by_id["wrong"]]
    platform = EmbeddedPlatform(data_dir=tmp_path, ports=dict.fromkeys(SERVICES, 0))
    async with platform, httpx.AsyncClient(timeout=1800) as client:
        gateway = platform.urls["gateway"]
        response = await client.post(f"{gateway}/v1/stagewise/score", json=group)
        assert response.status_code == 200, response.text
        out = response.json()
        buffer = await client.get(f"{gateway}/v1/buffers/{out['question_id']}")
    assert buffer.status_code == 200
    assert out["usage"]["calls"] >= 3  # one generation call + a scoring pass per rubric
    assert out["usage"]["prompt_tokens"] > 500 and out["usage"]["completion_tokens"] > 50
    thorough, wrong = out["rollouts"]
    for rollout in (thorough, wrong):
        assert rollout["fallback"] is None, rollout["fallback"]
        assert rollout["missing_stages"] == []
        assert set(rollout["scores"]) == {"plan", "research", "review", "answer"}
        assert all(0.0 <= v <= 1.0 for v in rollout["scores"].values())
        judged = {j["rubric_id"] for j in rollout["judgments"]}
        used = {r["id"] for rs in out["rubrics"].values() for r in rs}
        assert judged == used
        assert all(j["justification"] for j in rollout["judgments"])
        # the embedded default is the choices design: every rubric has an expected score
        assert all(0.0 <= j["expected_score"] <= 2.0 for j in rollout["judgments"])
    # the judge must see that "a fuel line ruptured" is worse than the right answer
    assert thorough["scores"]["answer"] > wrong["scores"]["answer"]
    for stage in ("plan", "research", "review", "answer"):
        assert thorough["advantages"][stage] == pytest.approx(-wrong["advantages"][stage])
