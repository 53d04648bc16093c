"""The client's stage parser and SS-GRPO math (for trainers that place stage credit on tokens
themselves) give what the platform's own domain code gives."""

import pytest

from rubricate.stagewise.domain.ssgrpo import partial_advantages, partial_returns
from rubricate.stagewise.domain.stages import parse_stages
from rubricate_client.ssgrpo import stage_advantages, stage_returns
from rubricate_client.stages import stage_spans
from tests.support.gateway import trajectory

TRAJECTORIES = [
    trajectory("x"),
    trajectory("x", plan=False),
    trajectory("x", research=False),
    trajectory("x", review=False, answer=False),
    "no stages at all",
    "<review>r</review><answer>a</answer>",
    '<think>t</think><call_tool name="s">q</call_tool><think>a</think><review>r</review>',
]


@pytest.mark.parametrize("text", TRAJECTORIES)
def test_stage_spans_match_the_platform(text: str) -> None:
    assert stage_spans(text) == parse_stages(text).spans


def test_returns_and_advantages_match_the_platform() -> None:
    scores: list[list[float | None]] = [
        [1.0, 0.5, 0.0, 1.0],
        [0.0, None, 1.0, 0.5],
        [0.5, 0.5, 0.5, 0.0],
        [None, None, None, 1.0],
    ]
    returns = stage_returns(scores)
    assert returns == partial_returns(scores)
    assert stage_advantages(returns) == partial_advantages(returns)
    centred = stage_advantages(returns, scale=False)
    column = [r[0] for r in returns if r[0] is not None]
    assert centred[0][0] == pytest.approx(column[0] - sum(column) / len(column))
