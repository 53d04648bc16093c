"""OpenRLHF 0.11.2's own reward fetch (its single-turn agent executor, one sample per
request) against a real gateway, in URL mode and in reward-function mode."""

import asyncio
import re
from pathlib import Path

import httpx
import pytest

from rubricate.common.auth import hash_key, new_key
from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate_client.openrlhf import STAGE_CREDIT_LINE, scoped_reward_url
from tests.support.gateway import Running, fast_llm
from tests.trainers.conftest import driver

N = 4


def generation_groups(running: Running) -> list[list[str]]:
    return sorted(
        sorted(set(re.findall(r"final ([a-h]) ", user)))
        for schema, user in running.backend.calls
        if schema == "stage_rubrics"
    )


@pytest.mark.parametrize("mode", ["url", "func"])
async def test_openrlhf_one_sample_per_request_is_scored_as_whole_groups(
    running: Running, tmp_path: Path, mode: str
) -> None:
    out = await driver(
        "openrlhf",
        "openrlhf_driver.py",
        mode,
        running.platform.urls["gateway"],
        str(tmp_path),
        env={"RUBRICATE_URL": running.platform.urls["gateway"], "RUBRICATE_GROUP_SIZE": str(N)},
    )
    assert len(out["samples"]) == 2 * N
    assert all(s["reward"] == 0.5 for s in out["samples"])
    assert all(s["group_size"] == N and s["partial_group"] == 0.0 for s in out["samples"])
    assert generation_groups(running) == [list("abcd"), list("efgh")]
    scorings = [1 for schema, _ in running.backend.calls if schema == "score_sheet"]
    assert scorings, "the judge scored nothing"
    # OpenRLHF takes one scalar per sample: the reward function says there is no stage credit
    stage_lines = [line for line in out["log_lines"] if line.startswith("rubricate stage credit")]
    assert stage_lines == ([STAGE_CREDIT_LINE] if mode == "func" else [])


async def test_openrlhf_blind_retries_make_no_judge_calls(running: Running, tmp_path: Path) -> None:
    """OpenRLHF re-posts a sample without an Idempotency-Key (after its 180 s timeout): the
    same samples posted again get their results with no new judge call."""
    url = running.platform.urls["gateway"]
    first = await driver("openrlhf", "openrlhf_driver.py", "url", url, str(tmp_path))
    calls = len(running.backend.calls)
    again = await driver("openrlhf", "openrlhf_driver.py", "url", url, str(tmp_path))
    assert again == first
    assert len(running.backend.calls) == calls


async def test_openrlhf_url_mode_authenticates_with_a_scoped_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With API keys, URL mode carries only the URL: a short-lived token scoped to
    /get_reward in its user-info (OpenRLHF's aiohttp sends it as Basic credentials) scores
    every sample; the API key itself is never in the URL; the bare URL gets 401s."""
    key = new_key()
    monkeypatch.setenv("RUBRICATE_AUTH_MODE", "api_key")
    monkeypatch.setenv("RUBRICATE_AUTH_API_KEYS", f"team-a:{hash_key(key)}")
    monkeypatch.setenv("RUBRICATE_AUTH_INTERNAL_TOKEN", "internal-" + new_key())
    backend = FakeJudgeBackend()
    platform = EmbeddedPlatform(
        data_dir=tmp_path / "platform",
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=backend,
    )
    async with platform:
        gateway = platform.urls["gateway"]
        url = await asyncio.to_thread(scoped_reward_url, gateway, api_key=key, ttl_s=3600)
        assert key not in url and url.endswith("/get_reward") and "@" in url
        out = await driver("openrlhf", "openrlhf_driver.py", "url", url, str(tmp_path))
        assert len(out["samples"]) == 2 * N
        assert all(s["reward"] == 0.5 and s["group_size"] == N for s in out["samples"])
        async with httpx.AsyncClient() as c:  # what OpenRLHF's retries met before: a 401
            r = await c.post(f"{gateway}/get_reward", json={"query": ["q"]})
            assert r.status_code == 401
