"""The bank and its snapshots in the database (PostgreSQL and SQLite)."""

import json
import threading
from collections.abc import Callable

import pytest
from sqlalchemy import Engine

from rubricate.core.normalize import question_hash
from rubricate.db.engine import unit_of_work
from rubricate.reflections.store.models import BankSnapshotRow
from rubricate.reflections.store.repository import BankStore
from rubricate.reflections.store.schemas import BankItemIn
from rubricate.reflections.store.snapshots import (
    SnapshotExistsError,
    SnapshotNotFoundError,
    SnapshotStore,
)
from rubricate.stagewise.store.service import BufferStore
from rubricate_client.errors import DomainError
from tests.support.rubrics import ids, rubric

QUESTION = "Why was the Mars Climate Orbiter lost?"


def item(
    question: str = QUESTION, *, step: int | None = 1, score: float = 0.5, tag: str = "a"
) -> BankItemIn:
    return BankItemIn(
        question=question,
        rubrics={"Critical Requirement": [f"requirement {tag}"], "Pitfalls": [f"pitfall {tag}"]},
        takeaways=[f"lesson {tag}"],
        reflection=f"<reflection_rubrics>{tag}</reflection_rubrics>",
        score=score,
        step=step,
        provenance={"candidate_index": 0, "tag": tag},
    )


@pytest.fixture
def bank(engine: Engine) -> BankStore:
    return BankStore(engine)


@pytest.fixture
def snapshots(engine: Engine) -> SnapshotStore:
    return SnapshotStore(engine)


def test_first_offer_writes_version_one(bank: BankStore, tenant: str) -> None:
    h = question_hash(QUESTION)
    out = bank.offer(tenant, h, item())
    assert out.written
    assert out.item.version == 1 and out.item.question_hash == h
    assert out.item.rubrics["Pitfalls"] == ["pitfall a"]
    assert out.item.provenance == {"candidate_index": 0, "tag": "a"}
    assert bank.get(tenant, h) == out.item


@pytest.mark.parametrize(
    ("first", "second", "kept"),
    [(3, 4, "b"), (4, 4, "b"), (4, 3, "a"), (None, 2, "b"), (5, None, "b")],
)
def test_a_newer_reflection_replaces_the_older(
    bank: BankStore, tenant: str, first: int | None, second: int | None, kept: str
) -> None:
    h = question_hash(QUESTION)
    bank.offer(tenant, h, item(step=first, tag="a"))
    out = bank.offer(tenant, h, item(step=second, tag="b"))
    assert out.written is (kept == "b")
    stored = bank.get(tenant, h)
    assert stored is not None
    assert stored.takeaways == [f"lesson {kept}"]
    assert stored.version == (2 if kept == "b" else 1)
    assert stored.created_at <= stored.updated_at


def test_items_are_scoped_by_tenant(bank: BankStore, tenant: str) -> None:
    h = question_hash(QUESTION)
    other = f"{tenant}-other"
    bank.offer(tenant, h, item(tag="mine"))
    assert bank.get(other, h) is None
    bank.offer(other, h, item(step=0, tag="theirs"))
    mine = bank.get(tenant, h)
    assert mine is not None and mine.takeaways == ["lesson mine"]
    assert bank.count(tenant) == 1 and bank.count(other) == 1
    assert bank.get_many(tenant, [h, "0" * 64]).keys() == {h}


def test_concurrent_writers_to_one_question_keep_the_newest_step(
    pg_engine: Engine, tenant: str
) -> None:
    bank = BankStore(pg_engine)
    h = question_hash(QUESTION)
    steps = list(range(24))
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def writer(mine: list[int]) -> None:
        try:
            barrier.wait()
            for step in mine:
                bank.offer(tenant, h, item(step=step, tag=str(step)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(steps[i::8][::-1],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stored = bank.get(tenant, h)
    assert stored is not None
    assert stored.step == 23 and stored.takeaways == ["lesson 23"]
    assert bank.count(tenant) == 1


def _fill(bank: BankStore, buffers: BufferStore, tenant: str) -> None:
    bank.offer(tenant, question_hash(QUESTION), item(step=3, tag="v3"))
    bank.offer(tenant, question_hash("Another question?"), item("Another question?", step=3))
    buffers.add(tenant, "q1", question=QUESTION, rubrics=[rubric("a"), rubric("b")], step=3)
    buffers.prune(tenant, "q1", variances={rubric("a").id: 0.0}, caps={"plan": 1})


def test_snapshot_and_restore_round_trip(
    engine: Engine, bank: BankStore, snapshots: SnapshotStore, tenant: str
) -> None:
    buffers = BufferStore(engine)
    _fill(bank, buffers, tenant)
    before = buffers.get(tenant, "q1")
    assert before is not None and ids(before) == [rubric("b").id]
    info = snapshots.create(tenant, 10)
    assert (info.step, info.bank_items, info.questions, info.rubrics) == (10, 2, 1, 2)

    # training goes on: the bank and the buffers change
    bank.offer(tenant, question_hash(QUESTION), item(step=11, tag="v11"))
    bank.offer(tenant, question_hash("Third?"), item("Third?", step=11))
    buffers.add(tenant, "q1", question=QUESTION, rubrics=[rubric("c")], step=11)
    buffers.add(tenant, "q2", question="Q2", rubrics=[rubric("d")], step=11)

    restored = snapshots.restore(tenant, 10)
    assert restored.info == info
    assert restored.question_ids == {"q1", "q2"}
    assert sorted(h for h, _ in restored.bank) == sorted(
        [question_hash(QUESTION), question_hash("Another question?")]
    )
    back = bank.get(tenant, question_hash(QUESTION))
    assert back is not None and back.takeaways == ["lesson v3"] and back.step == 3
    assert bank.get(tenant, question_hash("Third?")) is None
    assert buffers.get(tenant, "q2") is None
    after = buffers.get(tenant, "q1")
    assert after is not None and ids(after) == [rubric("b").id]
    # the pruned rubric came back pruned, and the version moved past every earlier one
    assert after.version > before.version + 1
    assert buffers.stats().pruned_rubrics >= 1
    assert [s.step for s in snapshots.list(tenant)] == [10]
    assert snapshots.list(f"{tenant}-other") == []


def test_snapshot_steps_are_unique_unless_replaced(
    bank: BankStore, snapshots: SnapshotStore, tenant: str
) -> None:
    bank.offer(tenant, question_hash(QUESTION), item(step=1))
    snapshots.create(tenant, 5)
    with pytest.raises(SnapshotExistsError):
        snapshots.create(tenant, 5)
    bank.offer(tenant, question_hash("Second?"), item("Second?", step=2))
    replaced = snapshots.create(tenant, 5, replace=True)
    assert replaced.bank_items == 2
    with pytest.raises(SnapshotNotFoundError):
        snapshots.restore(tenant, 6)


def test_export_import_round_trip_into_another_tenant(
    engine: Engine, bank: BankStore, snapshots: SnapshotStore, tenant: str
) -> None:
    buffers = BufferStore(engine)
    _fill(bank, buffers, tenant)
    snapshots.create(tenant, 20)
    lines = list(snapshots.export_lines(tenant, 20))
    header = json.loads(lines[0])
    assert header["format"] == "rubricate.bank-snapshot.v1" and header["step"] == 20
    assert len(lines) == 1 + 2 + 1

    other = f"{tenant}-copy"
    info = snapshots.import_lines(other, lines)
    assert (info.bank_items, info.questions, info.rubrics) == (2, 1, 2)
    snapshots.restore(other, 20)
    copy = bank.get(other, question_hash(QUESTION))
    assert copy is not None and copy.takeaways == ["lesson v3"]
    view = buffers.get(other, "q1")
    assert view is not None and ids(view) == [rubric("b").id]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda ls: ls[:-1], "line 1"),  # truncated: the header's counts disagree
        (lambda ls: [*ls[:2], "{not json", *ls[2:]], "line 3"),
        (
            lambda ls: [*ls[:2], json.dumps({"kind": "bank", "key": "k", "payload": {}}), *ls[2:]],
            "line 3",
        ),
        (lambda ls: [*ls, ls[1]], "line 5"),  # duplicate entry
        (lambda ls: [], "line 1"),
    ],
)
def test_a_bad_import_is_refused_whole(
    engine: Engine,
    bank: BankStore,
    snapshots: SnapshotStore,
    tenant: str,
    mutate: Callable[[list[str]], list[str]],
    field: str,
) -> None:
    _fill(bank, BufferStore(engine), tenant)
    snapshots.create(tenant, 30)
    lines = list(snapshots.export_lines(tenant, 30))
    other = f"{tenant}-bad"
    with pytest.raises(DomainError) as err:
        snapshots.import_lines(other, mutate(lines))
    assert err.value.field is not None and err.value.field.startswith(field)
    assert snapshots.list(other) == []
    with unit_of_work(engine, write=False) as session:
        assert session.get(BankSnapshotRow, (other, 30)) is None
