"""Nugget verification on the real embedded model (Qwen2.5-Coder-1.5B Q4_K_M on CPU): slow.

The answer is real text of the RAG24 dev set (TREC RAG 2024 topic 2024-109837, answer by
GPT-4o, from NamaWho/pyterrier-nuggetizer, Apache-2.0): three of its sentences, split into
two paragraphs. The first nugget is the topic's own; the second is deliberately false.
"""

from pathlib import Path

import httpx
import pytest

from rubricate.embedded import SERVICES, EmbeddedPlatform

pytestmark = pytest.mark.model

ANSWER = (
    "Pew Research Center is widely regarded as a trustworthy source of information. "
    "Established in 2004, Pew Research Center is a nonprofit, nonpartisan research "
    "organization that conducts public opinion surveys on a wide range of issues.\n\n"
    "Despite the decline in response rates, which has dropped to less than 10% of Americans "
    "responding to their polling, Pew Research Center maintains that this has not "
    "significantly affected the error rate of its surveys."
)


async def test_long_and_short_mode_with_the_embedded_model(tmp_path: Path) -> None:
    platform = EmbeddedPlatform(data_dir=tmp_path, ports=dict.fromkeys(SERVICES, 0))
    async with platform, httpx.AsyncClient(timeout=1800) as client:
        gateway = platform.urls["gateway"]
        long = await client.post(
            f"{gateway}/v1/nuggets/verify",
            json={
                "question": "is pew research trustworthy",
                "answer": ANSWER,
                "nuggets": [
                    {"text": "Established in 2004", "importance": "vital"},
                    {"text": "Pew Research is owned by a television network", "importance": "okay"},
                ],
                "batch_size": 1,
            },
        )
        short = await client.post(
            f"{gateway}/v1/nuggets/verify",
            json={
                "question": "In which year was Pew Research Center established?",
                "answer": "<answer>It was founded in 2004.</answer>",
                "nuggets": [{"text": "2004"}],
                "mode": "short",
            },
        )
    assert long.status_code == 200, long.text
    out = long.json()
    assert len(out["blocks"]) == 2
    # block 1 x 2 nuggets, one nugget per call; block 2 is one sentence whose main clause is
    # negated ("… has not significantly affected the error rate"), which the answer's reading
    # as assertion units does not credit (issue 32: a denial is not a claim of what it names),
    # so it is not_support with no judge call
    assert out["usage"]["calls"] == 2
    assert out["blocks"][1]["labels"] == ["not_support", "not_support"]
    assert out["judge"]["backend"] == "embedded" and out["usage"]["prompt_tokens"] > 200
    established, owned = out["nuggets"]
    assert established["label"] != "not_support" and established["block"] == 0
    assert owned["label"] == "not_support" and owned["block"] is None
    assert 0.0 < out["reward"] <= 1.0
    assert short.status_code == 200, short.text
    (n,) = short.json()["nuggets"]
    assert n["decided_by"] == "model"  # "it was founded in 2004" is no exact match of "2004"
    assert n["label"] == "support"
