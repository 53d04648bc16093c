"""Everything the console does is public API: the SDK's typed curation and browsing methods
(`rubricate_client.curation_api`) against a real gateway in API-key mode."""

import pytest

from rubricate_client import AsyncClient
from rubricate_client.errors import APIError
from tests.console.conftest import Console


async def test_the_sdk_browses_and_curates(console: Console) -> None:
    key = console.keys[console.tenant_a]
    async with AsyncClient(console.gateway, api_key=key) as c:
        listing = await c.list_questions(search="mars", sort="recent", limit=5)
        assert [q.question_id for q in listing.questions] == [console.question_id]
        assert listing.total == 1 and listing.questions[0].rubrics > 0

        buffer = await c.get_buffer(console.question_id)
        rubric = buffer.all_rubrics()[0]
        pinned = await c.curate_rubric(
            console.question_id, rubric.id, {"action": "pin", "reason": "keep it"}
        )
        assert pinned.rubric.pinned and pinned.event.author.startswith("key:")
        assert key not in pinned.event.author
        (event,) = (await c.rubric_curations(console.question_id)).events
        assert (event.action, event.reason) == ("pin", "keep it")
        with pytest.raises(APIError) as conflict:
            await c.curate_rubric(console.question_id, rubric.id, {"action": "pin"})
        assert conflict.value.status == 409

        scorings = await c.list_scorings(console.question_id, limit=5)
        assert [s.scoring_id for s in scorings.scorings] == console.scoring_ids[::-1]
        first = await c.get_scoring(console.scoring_ids[0])
        assert set(first.rollouts) == {"good", "odd"}
        kept = await c.scoring_trajectories(console.scoring_ids[0])
        assert kept.trajectories is not None and "<script>" in kept.trajectories["odd"]
        audits = await c.audit_questions([console.question_id, "no-such-question"])
        assert [a.question_id for a in audits.questions] == [console.question_id]

        items = await c.list_bank_items(status="pending")
        assert [i.question_hash for i in items.items] == [console.question_hash]
        edited = await c.curate_bank_item(
            console.question_hash, {"action": "edit", "takeaways": ["Check the units first."]}
        )
        assert edited.item.takeaways == ["Check the units first."]
        versions = (await c.bank_item_history(console.question_hash)).versions
        assert [v.action for v in versions] == ["accepted", "edit"]
        assert versions[0].takeaways == ["Lesson 1 on units.", "Lesson 2 on units."]

        assert (await c.list_jobs(limit=5)).jobs == []
        assert (await c.list_replay_jobs(limit=5)).jobs == []
