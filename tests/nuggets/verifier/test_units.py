"""The nugget judge reads each block as assertion units (issue 32), on the FAKE labeller (word
overlap: it would support any block holding a nugget's words): a hedged or denied list of the
facts reaches it without their content, and a block that asserts nothing is not_support with
no judge call; the gateway's reward of such an answer is 0."""

from typing import Literal

from rubricate.common.usage import Usage
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.nuggets.gateway.service import NuggetService, NuggetSettings
from rubricate.nuggets.verifier.schemas import NuggetLabelsRequest
from rubricate.nuggets.verifier.service import NuggetLabelService
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_nuggets import FakeNuggetLabeller
from rubricate_client.schemas.nuggets import NuggetIn, NuggetVerifyRequest

FAST = LLMSettings(max_retries=1, backoff_base_s=0.001, backoff_max_s=0.002)
NUGGETS = ["The Berlin Wall fell on 9 November 1989.", "Crowds crossed the border that night."]
HEDGED = (
    "I cannot confirm whether the Berlin Wall fell on 9 November 1989, or whether crowds "
    "crossed the border that night."
)
DENIED = "It is not true that the Berlin Wall fell on 9 November 1989."
ASSERTED = "The Berlin Wall fell on 9 November 1989. Crowds crossed the border that night."


def labeller(
    reading: Literal["auto", "model", "cues", "off"] = "auto",
) -> tuple[NuggetLabelService, FakeJudgeBackend]:
    backend = FakeJudgeBackend(handlers={"nugget_labels": FakeNuggetLabeller()})
    tasks = TaskSettings(unit_reading=reading)
    return NuggetLabelService(backend=backend, llm=FAST, tasks=tasks), backend


async def test_blocks_that_assert_nothing_are_not_support_without_a_judge_call() -> None:
    svc, backend = labeller()
    out = await svc.label(
        NuggetLabelsRequest(question="q?", blocks=[HEDGED, DENIED, ASSERTED], nuggets=NUGGETS)
    )
    assert [b.labels for b in out.blocks] == [
        ["not_support", "not_support"],
        ["not_support", "not_support"],
        ["support", "support"],
    ]
    labelled = [p for name, p in backend.calls if name == "nugget_labels"]
    assert len(labelled) == 1 and "Crowds crossed the border" in labelled[0]


async def test_a_hedged_clause_reaches_the_judge_without_its_content() -> None:
    svc, backend = labeller()
    block = "The wall fell in 1961. Perhaps crowds crossed the border that night."
    out = await svc.label(NuggetLabelsRequest(question="q?", blocks=[block], nuggets=NUGGETS))
    assert out.blocks[0].labels[1] != "support"  # the hedged crossing
    (prompt,) = [p for name, p in backend.calls if name == "nugget_labels"]
    assert "The wall fell in 1961. [hedge, not shown]" in prompt
    assert "crossed" not in prompt.split("Nuggets to label:")[0]
    # the defence off: the labeller reads the words and is fooled
    svc, _ = labeller("off")
    out = await svc.label(NuggetLabelsRequest(question="q?", blocks=[block], nuggets=NUGGETS))
    assert out.blocks[0].labels[1] == "support"


async def test_the_reward_of_a_hedged_or_denied_list_of_the_facts_is_zero() -> None:
    svc, _ = labeller()
    service = NuggetService(verifier=None, settings=NuggetSettings(), labeller=svc.label)
    nuggets = [NuggetIn(text=t, importance="vital") for t in NUGGETS]
    for answer, reward in ((HEDGED, 0.0), (DENIED + "\n\n" + HEDGED, 0.0), (ASSERTED, 1.0)):
        out = await service.verify(
            NuggetVerifyRequest(question="q?", answer=answer, nuggets=nuggets), usage=Usage()
        )
        assert out.reward == reward, answer
