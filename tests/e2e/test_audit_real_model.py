"""End to end on the real embedded model as both judges (slow): the live judge scores a
group with the `choices` design, the audit re-scores it with the same model and the
`generate` design (the embedded default reference, docs/audit.md).

The group is scored on its persistent rubrics alone (`evolve: false`): rubric generation on
the real model is tested in test_stagewise_real_model.py and the demo; here it made the
audit re-score ~19 rubrics per rollout with written justifications, 1,184 s of CI's suite."""

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from rubricate.demo import load_example
from rubricate.embedded import SERVICES, EmbeddedPlatform

pytestmark = [pytest.mark.model, pytest.mark.audit]

AUDIT_WAIT_S = 600
"""37 s alone on an idle 2-core machine (2026-11-29, persistent rubrics only); in `make test`
it shares the cores with the other xdist workers. A limit of its own above its wait: the
suite's per-test limit ends in os._exit, which shows only as a crashed worker."""


@pytest.mark.timeout(AUDIT_WAIT_S + 300)
async def test_the_embedded_model_audits_itself_with_the_other_design(tmp_path: Path) -> None:
    group = load_example()
    by_id = {r["id"]: r for r in group["rollouts"]}
    group["rollouts"] = [by_id["thorough"], by_id["wrong"]]
    group["step"] = 0
    group["evolve"] = False
    platform = EmbeddedPlatform(data_dir=tmp_path, ports=dict.fromkeys(SERVICES, 0))
    async with (
        platform,
        httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=AUDIT_WAIT_S) as c,
    ):
        scored = await c.post("/v1/stagewise/score", json=group)
        assert scored.status_code == 200, scored.text
        scoring_id = scored.json()["scoring_id"]
        deadline = time.monotonic() + AUDIT_WAIT_S
        audit: dict[str, Any] = {}
        while time.monotonic() < deadline:
            response = await c.get(f"/v1/audit/groups/{scoring_id}")
            if response.status_code == 200:
                audit = response.json()
                if audit["status"] in ("done", "failed"):
                    break
            await asyncio.sleep(1.0)
    assert audit.get("status") == "done", audit
    assert audit["reason"] == "first"
    result = audit["result"]
    assert result["reference_design"] == "generate"
    used = {r["id"] for rs in scored.json()["rubrics"].values() for r in rs}
    assert {r["rubric_id"] for r in result["rubrics"]} == used
    assert all(0.0 <= r["agreement"] <= 1.0 for r in result["rubrics"])
    assert 0.0 <= result["agreement"] <= 1.0
    assert set(result["rollout_deltas"]) == {"thorough", "wrong"}
    assert result["kendall_tau"] in (-1.0, 1.0, None)
