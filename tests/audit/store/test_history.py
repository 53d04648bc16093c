"""The rubric history of a buffer, on both databases: rubrics added at a step, pruned at a
later one with their variance, in order; the JSONL export reads every question in batches."""

from unittest import mock

from sqlalchemy import Engine

from rubricate.audit.store import repository
from rubricate.audit.store.repository import question_history, tenant_history
from rubricate.stagewise.store.schemas import CurateRubricRequest
from rubricate.stagewise.store.service import BufferStore
from rubricate_client.schemas.audit import RubricHistoryEntry
from rubricate_client.schemas.curation import RubricAction
from rubricate_client.schemas.rubrics import RubricSpec
from tests.support.rubrics import rubric


def test_every_rubric_ever_in_the_buffer_with_its_steps(
    store: BufferStore, engine: Engine, tenant: str
) -> None:
    keep = rubric("keeps going", stage="plan", step=1)
    weak = rubric("barely discriminates", stage="plan", step=1)
    dataset = rubric("is correct", stage="answer", origin="persistent", step=1)
    store.add(tenant, "q", question="Q?", rubrics=[keep, weak, dataset], step=1)
    store.prune(tenant, "q", variances={keep.id: 0.5, weak.id: 0.01}, caps={"plan": 1}, step=4)

    history = question_history(engine, tenant, "q")
    assert history is not None
    by_id = {e.id: e for e in history}
    assert [e.id for e in history] == [keep.id, weak.id, dataset.id]
    assert by_id[weak.id].pruned_step == 4 and by_id[weak.id].pruned_at is not None
    assert by_id[weak.id].variance == 0.01
    assert by_id[keep.id].pruned_step is None and by_id[keep.id].variance == 0.5
    assert by_id[dataset.id].origin == "persistent" and by_id[dataset.id].added_step == 1
    assert by_id[keep.id].title == "keeps going" and by_id[keep.id].polarity == "positive"

    assert question_history(engine, tenant, "unknown") is None
    assert question_history(engine, f"{tenant}-other", "q") is None


def test_the_export_reads_every_question_in_batches(
    store: BufferStore, engine: Engine, tenant: str
) -> None:
    for q in ("a", "b", "c"):
        store.add(tenant, q, question=f"{q}?", rubrics=[rubric(f"{q}1"), rubric(f"{q}2")])
    store.add(f"{tenant}-other", "a", question="a?", rubrics=[rubric("theirs")])
    with mock.patch.object(repository, "EXPORT_BATCH", 4):
        batches = list(tenant_history(engine, tenant))
    assert [len(b) for b in batches] == [4, 2]
    entries = [e for b in batches for e in b]
    assert [(e.question_id, e.title) for e in entries] == [
        ("a", "a1"),
        ("a", "a2"),
        ("b", "b1"),
        ("b", "b2"),
        ("c", "c1"),
        ("c", "c2"),
    ]


def test_the_history_says_who_pinned_retired_and_edited(
    store: BufferStore, engine: Engine, tenant: str
) -> None:
    kept, dropped, edited = rubric("kept"), rubric("dropped"), rubric("edited")
    store.add(tenant, "q", question="Q?", rubrics=[kept, dropped, edited], step=1)

    def curate(rid: str, action: RubricAction, edit: RubricSpec | None = None) -> str:
        request = CurateRubricRequest(action=action, author="key:abc", edit=edit)
        return store.curate(tenant, "q", rid, request)[0].rubric.id

    curate(kept.id, "pin")
    curate(dropped.id, "retire")
    spec = RubricSpec(title="edited better", description="The response is edited better.")
    new_id = curate(edited.id, "edit", spec)

    entries = [e for batch in tenant_history(engine, tenant) for e in batch]
    by_id = {e.id: e for e in entries}
    assert [e.id for e in entries] == [kept.id, dropped.id, edited.id, new_id]
    assert by_id[kept.id].pinned and by_id[kept.id].retired_by is None
    assert not by_id[dropped.id].pinned and by_id[dropped.id].retired_by == "key:abc"
    assert by_id[dropped.id].pruned_at is not None and by_id[dropped.id].replaced_by is None
    assert by_id[edited.id].replaced_by == new_id and by_id[edited.id].retired_by == "key:abc"
    assert by_id[new_id].created_by == "key:abc" and by_id[new_id].pruned_at is None
    assert by_id[new_id].title == "edited better" and by_id[kept.id].created_by is None


def test_an_entry_without_the_curation_fields_still_parses() -> None:
    old = {
        "question_id": "q",
        "id": "r_1",
        "stage": "plan",
        "title": "t",
        "description": "d",
        "weight": 2,
        "polarity": "positive",
        "origin": "active",
        "added_step": None,
        "added_at": "2026-01-01T00:00:00Z",
        "pruned_step": None,
        "pruned_at": None,
        "variance": None,
    }
    entry = RubricHistoryEntry.model_validate(old)
    assert (entry.pinned, entry.retired_by, entry.replaced_by, entry.created_by) == (
        False,
        None,
        None,
        None,
    )
