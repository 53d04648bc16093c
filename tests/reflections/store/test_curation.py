"""Bank curation in the database (PostgreSQL and SQLite): approve, edit, retire, the item's
versions, the listing, snapshots with review state."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from rubricate.core.normalize import question_hash
from rubricate.db.engine import unit_of_work
from rubricate.reflections.store.models import (
    BankItemRow,
    BankItemVersionRow,
    BankSnapshotEntryRow,
)
from rubricate.reflections.store.repository import (
    BankItemConflictError,
    BankItemNotFoundError,
    BankStore,
)
from rubricate.reflections.store.schemas import BankCurationIn, BankItemIn
from rubricate.reflections.store.snapshots import SnapshotStore
from rubricate.stagewise.store.models import RubricRow
from rubricate.stagewise.store.schemas import CurateRubricRequest
from rubricate.stagewise.store.service import BufferStore
from rubricate_client.errors import DomainError
from tests.support.rubrics import rubric

QUESTION = "Why was the Mars Climate Orbiter lost?"
H = question_hash(QUESTION)


def item(question: str = QUESTION, *, step: int | None = 1, tag: str = "a") -> BankItemIn:
    return BankItemIn(
        question=question,
        rubrics={"Critical Requirement": [f"requirement {tag}"], "Pitfalls": [f"pitfall {tag}"]},
        takeaways=[f"lesson {tag}"],
        reflection=f"<reflection_rubrics>{tag}</reflection_rubrics>",
        score=0.5,
        step=step,
    )


def curation(action: str, author: str = "key:alice", **fields: object) -> BankCurationIn:
    return BankCurationIn.model_validate({"action": action, "author": author, **fields})


@pytest.fixture
def bank(engine: Engine) -> BankStore:
    return BankStore(engine)


def test_approve_edit_retire_are_recorded_with_author_and_reason(
    bank: BankStore, tenant: str
) -> None:
    bank.offer(tenant, H, item(tag="v1"))
    approved = bank.curate(tenant, H, curation("approve", reason="checked it"))
    assert approved.item.status == "approved" and approved.item.version == 2
    assert approved.item.reviewed_by == "key:alice" and approved.item.reviewed_at is not None
    assert approved.event.target == "bank_item" and approved.event.subject == H
    assert approved.event.action == "approve" and approved.event.author == "key:alice"
    assert approved.event.reason == "checked it" and approved.event.detail == {"version": 2}

    edited = bank.curate(
        tenant,
        H,
        curation(
            "edit",
            author="key:bob",
            takeaways=["Convert units at every interface."],
            reason="clearer",
        ),
    )
    # an edit changes only what it names, and keeps the review state
    assert edited.item.takeaways == ["Convert units at every interface."]
    assert edited.item.rubrics["Pitfalls"] == ["pitfall v1"]
    assert edited.item.status == "approved" and edited.item.reviewed_by == "key:alice"
    assert edited.item.version == 3 and edited.event.detail == {"version": 3}

    retired = bank.curate(tenant, H, curation("retire", author="key:carol", reason="wrong"))
    assert retired.item.status == "retired" and retired.item.reviewed_by == "key:carol"
    stored = bank.get(tenant, H)
    assert stored is not None and stored.status == "retired" and stored.version == 4

    history = bank.history(tenant, H)
    assert history is not None and history.question_hash == H
    got = [(v.version, v.action, v.author, v.reason, v.status) for v in history.versions]
    assert got == [
        (1, "accepted", None, None, "pending"),
        (2, "approve", "key:alice", "checked it", "approved"),
        (3, "edit", "key:bob", "clearer", "approved"),
        (4, "retire", "key:carol", "wrong", "retired"),
    ]
    # the edit kept the old text: it is in the versions before it
    assert history.versions[1].takeaways == ["lesson v1"]
    assert history.versions[2].takeaways == ["Convert units at every interface."]
    assert history.versions[-1].takeaways == stored.takeaways  # the last is the item now
    ats = [v.at for v in history.versions]
    assert ats == sorted(ats)


def test_an_edit_of_the_rubrics_replaces_the_categories_given(bank: BankStore, tenant: str) -> None:
    bank.offer(tenant, H, item(tag="v1"))
    edited = bank.curate(
        tenant, H, curation("edit", rubrics={"Analytical Approach": ["Read the report."]})
    )
    assert edited.item.rubrics == {"Analytical Approach": ["Read the report."]}
    assert edited.item.takeaways == ["lesson v1"]
    history = bank.history(tenant, H)
    assert history is not None
    assert history.versions[0].rubrics["Critical Requirement"] == ["requirement v1"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"rubrics": {"Vibes": ["x"]}}, "rubrics.Vibes"),
        ({"rubrics": {"Pitfalls": []}}, "rubrics.Pitfalls"),
        ({"rubrics": {}}, "rubrics"),
        ({"takeaways": []}, "takeaways"),
    ],
)
def test_an_edit_the_item_cannot_hold_is_refused_and_changes_nothing(
    bank: BankStore, tenant: str, fields: dict[str, Any], field: str
) -> None:
    bank.offer(tenant, H, item())
    with pytest.raises(DomainError) as err:
        bank.curate(tenant, H, curation("edit", **fields))
    assert err.value.field == field
    stored = bank.get(tenant, H)
    assert stored is not None and stored.version == 1 and stored.takeaways == ["lesson a"]
    history = bank.history(tenant, H)
    assert history is not None and len(history.versions) == 1


def test_unknown_and_retired_items_cannot_be_curated(bank: BankStore, tenant: str) -> None:
    with pytest.raises(BankItemNotFoundError):
        bank.curate(tenant, H, curation("approve"))
    assert bank.history(tenant, H) is None
    bank.offer(tenant, H, item())
    bank.curate(tenant, H, curation("retire"))
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("retire", {}),
        ("approve", {}),
        ("edit", {"takeaways": ["new"]}),
    ]
    for action, fields in attempts:
        with pytest.raises(BankItemConflictError, match="retired"):
            bank.curate(tenant, H, curation(action, **fields))
    history = bank.history(tenant, H)
    assert history is not None and [v.action for v in history.versions] == ["accepted", "retire"]


def test_a_newer_reflection_makes_the_item_pending_again(bank: BankStore, tenant: str) -> None:
    bank.offer(tenant, H, item(step=1, tag="v1"))
    bank.curate(tenant, H, curation("approve"))
    out = bank.offer(tenant, H, item(step=2, tag="v2"))
    assert out.written and out.result == "replaced"
    assert out.item.status == "pending" and out.item.reviewed_by is None
    assert out.item.version == 3 and out.item.takeaways == ["lesson v2"]
    kept = bank.offer(tenant, H, item(step=1, tag="late"))
    assert not kept.written and kept.result == "kept" and kept.item.version == 3
    history = bank.history(tenant, H)
    assert history is not None
    assert [(v.version, v.action) for v in history.versions] == [
        (1, "accepted"),
        (2, "approve"),
        (3, "replaced"),
    ]
    assert history.versions[1].takeaways == ["lesson v1"]


def test_a_retired_question_takes_no_reflections(bank: BankStore, tenant: str) -> None:
    bank.offer(tenant, H, item(step=1, tag="v1"))
    bank.curate(tenant, H, curation("retire", reason="misleading"))
    out = bank.offer(tenant, H, item(step=9, tag="v9"))
    assert not out.written and out.result == "retired"
    stored = bank.get(tenant, H)
    assert stored is not None and stored.status == "retired"
    assert stored.takeaways == ["lesson v1"] and stored.version == 2


def test_listing_pages_filters_and_searches(bank: BankStore, engine: Engine, tenant: str) -> None:
    questions = [f"Question {n}: about 100% of the MARS_{n} data?" for n in range(7)]
    base = datetime.now(UTC) - timedelta(days=1)
    for n, q in enumerate(questions):
        bank.offer(tenant, question_hash(q), item(q, tag=str(n)))
    with unit_of_work(engine, write=True) as session:  # a known order of updates
        for n, q in enumerate(questions):
            session.execute(
                update(BankItemRow)
                .where(BankItemRow.tenant == tenant, BankItemRow.question_hash == question_hash(q))
                .values(updated_at=base + timedelta(minutes=n))
            )
    bank.curate(tenant, question_hash(questions[1]), curation("approve"))
    bank.curate(tenant, question_hash(questions[2]), curation("retire"))
    bank.offer(tenant, question_hash("Something else?"), item("Something else?"))

    everything = bank.list_items(tenant, limit=50)
    assert everything.total == 8 and len(everything.items) == 8
    stamps = [i.updated_at for i in everything.items]
    assert stamps == sorted(stamps, reverse=True)  # the most recently updated first
    assert everything.items[0].question == "Something else?"

    page = bank.list_items(tenant, search="mars_", offset=2, limit=2)
    assert (page.total, page.offset, page.limit) == (7, 2, 2)
    # curated items were updated last; the rest follow in reverse order of their update
    order = [questions[2], questions[1], questions[6], questions[5], questions[4]]
    assert [i.question for i in page.items] == order[2:4]
    assert bank.list_items(tenant, search="100%", limit=50).total == 7
    assert bank.list_items(tenant, search="1_0", limit=50).total == 0  # `_` is no wildcard
    assert bank.list_items(tenant, search="QUESTION 3", limit=50).total == 1

    approved = bank.list_items(tenant, status="approved")
    assert [i.question for i in approved.items] == [questions[1]] and approved.total == 1
    assert approved.items[0].reviewed_by == "key:alice"
    retired = bank.list_items(tenant, status="retired")
    assert [i.status for i in retired.items] == ["retired"]
    assert bank.list_items(tenant, status="pending").total == 6
    assert bank.list_items(tenant, offset=100).items == []


def test_another_tenant_sees_and_curates_nothing(bank: BankStore, tenant: str) -> None:
    other = f"{tenant}-other"
    bank.offer(tenant, H, item())
    assert bank.list_items(other).total == 0
    assert bank.history(other, H) is None
    with pytest.raises(BankItemNotFoundError):
        bank.curate(other, H, curation("retire"))
    stored = bank.get(tenant, H)
    assert stored is not None and stored.status == "pending" and stored.version == 1


def test_snapshot_and_restore_keep_the_review_state(
    engine: Engine, bank: BankStore, tenant: str
) -> None:
    snapshots = SnapshotStore(engine)
    second = question_hash("Second?")
    bank.offer(tenant, H, item(tag="v1"))
    bank.offer(tenant, second, item("Second?"))
    bank.curate(tenant, H, curation("approve", author="key:alice"))
    snapshots.create(tenant, 10)
    # after the snapshot: a newer reflection makes it pending again
    bank.offer(tenant, H, item(step=5, tag="v5"))
    assert (stored := bank.get(tenant, H)) is not None and stored.status == "pending"

    snapshots.restore(tenant, 10)
    back = bank.get(tenant, H)
    assert back is not None and back.status == "approved" and back.reviewed_by == "key:alice"
    assert back.takeaways == ["lesson v1"]
    history = bank.history(tenant, H)
    assert history is not None
    assert [(v.version, v.action) for v in history.versions] == [
        (1, "accepted"),
        (2, "approve"),
        (3, "replaced"),
        (4, "restored"),
    ]
    assert back.version == 4 and history.versions[-1].status == "approved"
    # an exported copy carries the review state to another tenant
    copy = f"{tenant}-copy"
    snapshots.import_lines(copy, list(snapshots.export_lines(tenant, 10)))
    snapshots.restore(copy, 10)
    copied = bank.get(copy, H)
    assert copied is not None and copied.status == "approved" and copied.version == 3


def test_a_retirement_survives_the_restore_of_an_earlier_snapshot(
    engine: Engine, bank: BankStore, tenant: str
) -> None:
    snapshots = SnapshotStore(engine)
    bank.offer(tenant, H, item(tag="v1"))
    bank.curate(tenant, H, curation("approve"))
    snapshots.create(tenant, 1)
    bank.curate(tenant, H, curation("retire", author="key:carol"))
    snapshots.restore(tenant, 1)
    back = bank.get(tenant, H)
    assert back is not None and back.status == "retired" and back.reviewed_by == "key:carol"
    history = bank.history(tenant, H)
    assert history is not None and history.versions[-1].action == "restored"
    assert history.versions[-1].status == "retired"


def test_an_old_snapshot_restores_its_items_as_pending(
    engine: Engine, bank: BankStore, tenant: str
) -> None:
    snapshots = SnapshotStore(engine)
    bank.offer(tenant, H, item())
    bank.curate(tenant, H, curation("approve"))
    snapshots.create(tenant, 3)
    # a snapshot written before curation existed has no review state in its entries
    with unit_of_work(engine, write=True) as session:
        entry = session.scalars(
            select(BankSnapshotEntryRow).where(
                BankSnapshotEntryRow.tenant == tenant, BankSnapshotEntryRow.kind == "bank"
            )
        ).one()
        old = {
            k: v
            for k, v in entry.payload.items()
            if k not in ("status", "reviewed_by", "reviewed_at")
        }
        entry.payload = old
    snapshots.restore(tenant, 3)
    back = bank.get(tenant, H)
    assert back is not None and back.status == "pending" and back.reviewed_by is None


def test_a_question_written_again_after_a_restore_removed_it_continues_its_history(
    engine: Engine, bank: BankStore, tenant: str
) -> None:
    snapshots = SnapshotStore(engine)
    snapshots.create(tenant, 0)  # an empty bank
    bank.offer(tenant, H, item(tag="v1"))
    bank.curate(tenant, H, curation("approve"))
    snapshots.restore(tenant, 0)
    assert bank.get(tenant, H) is None
    out = bank.offer(tenant, H, item(tag="again"))
    assert out.result == "accepted" and out.item.version == 3
    history = bank.history(tenant, H)
    assert history is not None
    assert [(v.version, v.action) for v in history.versions] == [
        (1, "accepted"),
        (2, "approve"),
        (3, "accepted"),
    ]
    with unit_of_work(engine, write=False) as session:
        rows = session.scalars(
            select(BankItemVersionRow).where(BankItemVersionRow.tenant == tenant)
        ).all()
    assert len(rows) == 3


def test_a_pinned_rubric_is_still_pinned_after_a_restore(engine: Engine, tenant: str) -> None:
    buffers = BufferStore(engine)
    snapshots = SnapshotStore(engine)
    buffers.add(tenant, "q1", question=QUESTION, rubrics=[rubric("a"), rubric("b")], step=1)
    rid = rubric("a").id
    buffers.curate(tenant, "q1", rid, CurateRubricRequest(action="pin", author="key:alice"))
    snapshots.create(tenant, 2)
    buffers.curate(tenant, "q1", rid, CurateRubricRequest(action="unpin", author="key:alice"))
    snapshots.restore(tenant, 2)
    with unit_of_work(engine, write=False) as session:
        row = session.get(RubricRow, (tenant, "q1", rid))
        assert row is not None and row.pinned_at is not None and row.pinned_by == "key:alice"
    # the record of who changed what outlives the restore, and goes on after it
    log = buffers.curations(tenant, "q1")
    assert log is not None and [e.action for e in log.events] == ["unpin", "pin"]
    buffers.curate(tenant, "q1", rid, CurateRubricRequest(action="unpin", author="key:bob"))
    log = buffers.curations(tenant, "q1")
    assert log is not None and [e.action for e in log.events] == ["unpin", "unpin", "pin"]
    assert log.events[0].author == "key:bob"
