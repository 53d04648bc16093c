"""BufferStore on PostgreSQL and on SQLite: the buffer semantics of RubricEM App. C.1/C.4."""

import uuid

import pytest
from sqlalchemy import select

from rubricate.db.engine import unit_of_work
from rubricate.stagewise.store.models import RubricRow
from rubricate.stagewise.store.service import BufferNotFoundError, BufferStore
from tests.support.rubrics import ids, rubric


@pytest.fixture
def qid() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


def test_missing_buffer_is_none(store: BufferStore, tenant: str, qid: str) -> None:
    assert store.get(tenant, qid) is None


def test_add_get_round_trip(store: BufferStore, tenant: str, qid: str) -> None:
    plan = rubric("plans the search", step=3)
    ans = rubric("cites sources", stage="answer", origin="persistent", weight=3)
    review = rubric("checks claims", stage="review")
    view = store.add(tenant, qid, question="Why is the sky blue?", rubrics=[plan, ans, review])
    assert view.question_id == qid
    assert view.question == "Why is the sky blue?"
    assert view.version == 1
    assert view.updated_at is not None and view.updated_at.tzinfo is not None
    assert list(view.rubrics) == ["plan", "research", "review", "answer"]
    assert view.rubrics["plan"] == [plan]
    assert view.rubrics["research"] == []
    assert view.rubrics["review"] == [review]
    assert view.rubrics["answer"] == [ans]
    assert store.get(tenant, qid) == view


def test_tenants_are_separate(store: BufferStore, tenant: str, qid: str) -> None:
    store.add(tenant, qid, question="q", rubrics=[rubric("a")])
    assert store.get(f"{tenant}-other", qid) is None


def test_step_fills_created_step_and_variance_is_the_stores(
    store: BufferStore, tenant: str, qid: str
) -> None:
    sent = rubric("a").model_copy(update={"variance": 0.7})
    view = store.add(tenant, qid, question="q", rubrics=[sent, rubric("b", step=2)], step=9)
    got = {r.title: r for r in view.all_rubrics()}
    assert got["a"].created_step == 9
    assert got["a"].variance is None
    assert got["b"].created_step == 2


def test_existing_rubric_left_unchanged_and_no_version_bump(
    store: BufferStore, tenant: str, qid: str
) -> None:
    a = rubric("a")
    first = store.add(tenant, qid, question="q", rubrics=[a])
    again = store.add(
        tenant, qid, question="other text", rubrics=[a.model_copy(update={"weight": 1})]
    )
    assert again.version == first.version == 1
    assert again.question == "q"
    assert again.rubrics["plan"][0].weight == a.weight


def test_persistent_upgrade_and_persistent_stays(store: BufferStore, tenant: str, qid: str) -> None:
    a = rubric("a", stage="answer")
    p = rubric("p", stage="answer", origin="persistent")
    store.add(tenant, qid, question="q", rubrics=[a, p])
    view = store.add(
        tenant,
        qid,
        question="q",
        rubrics=[
            a.model_copy(update={"origin": "persistent"}),
            p.model_copy(update={"origin": "active"}),
        ],
    )
    assert {r.id: r.origin for r in view.rubrics["answer"]} == {
        a.id: "persistent",
        p.id: "persistent",
    }
    assert view.version == 2


def test_duplicates_in_one_request_are_stored_once(
    store: BufferStore, tenant: str, qid: str
) -> None:
    a = rubric("a")
    view = store.add(
        tenant, qid, question="q", rubrics=[a, a.model_copy(update={"origin": "persistent"})]
    )
    assert len(view.rubrics["plan"]) == 1
    assert view.rubrics["plan"][0].origin == "persistent"


def test_prune_lowest_variance_over_the_cap(store: BufferStore, tenant: str, qid: str) -> None:
    rs = [rubric(t) for t in "abcd"]  # plan cap is 3
    store.add(tenant, qid, question="q", rubrics=rs)
    out = store.prune(
        tenant, qid, variances={rs[0].id: 0.2, rs[1].id: 0.0, rs[2].id: 0.1, rs[3].id: 0.3}
    )
    assert out.pruned == [rs[1].id]
    assert out.ignored == []
    assert ids(out.buffer, "plan") == [rs[0].id, rs[2].id, rs[3].id]
    assert [r.variance for r in out.buffer.rubrics["plan"]] == [0.2, 0.1, 0.3]
    assert store.get(tenant, qid) == out.buffer
    assert out.buffer.version == 2


def test_prune_ties_go_against_the_older(store: BufferStore, tenant: str, qid: str) -> None:
    rs = [rubric(t, stage="research") for t in ("old", "mid", "new")]  # research cap is 2
    for r in rs:  # three writes: insertion order old, mid, new
        store.add(tenant, qid, question="q", rubrics=[r])
    out = store.prune(tenant, qid, variances={r.id: 0.1 for r in reversed(rs)})
    assert out.pruned == [rs[0].id]


def test_caps_are_per_request(store: BufferStore, tenant: str, qid: str) -> None:
    rs = [rubric(t, stage="review") for t in "ab"]
    store.add(tenant, qid, question="q", rubrics=rs)
    out = store.prune(tenant, qid, variances={rs[0].id: 0.5, rs[1].id: 0.4}, caps={"review": 0})
    assert sorted(out.pruned) == sorted(r.id for r in rs)
    assert out.buffer.rubrics["review"] == []


def test_persistent_never_pruned(store: BufferStore, tenant: str, qid: str) -> None:
    ps = [rubric(f"p{i}", stage="answer", origin="persistent") for i in range(6)]
    store.add(tenant, qid, question="q", rubrics=ps)
    out = store.prune(tenant, qid, variances={p.id: 0.0 for p in ps}, caps={"answer": 0}, step=5)
    assert out.pruned == []
    assert ids(out.buffer, "answer") == [p.id for p in ps]
    assert all(r.variance == 0.0 for r in out.buffer.rubrics["answer"])


def test_unmeasured_rubric_not_pruned(store: BufferStore, tenant: str, qid: str) -> None:
    rs = [rubric(t, stage="review") for t in "abc"]  # review cap is 2
    store.add(tenant, qid, question="q", rubrics=rs)
    out = store.prune(tenant, qid, variances={rs[0].id: 0.3, rs[1].id: 0.4})
    assert out.pruned == [rs[0].id]  # c, newest and unmeasured, is not a candidate
    out = store.prune(tenant, qid, variances={})
    assert out.pruned == []
    assert ids(out.buffer, "review") == [rs[1].id, rs[2].id]


def test_unmeasured_excess_kept_over_the_cap(store: BufferStore, tenant: str, qid: str) -> None:
    rs = [rubric(t, stage="review") for t in "abcd"]
    store.add(tenant, qid, question="q", rubrics=rs)
    out = store.prune(tenant, qid, variances={rs[0].id: 0.3})
    assert out.pruned == [rs[0].id]  # two over the cap, only one measured
    assert ids(out.buffer, "review") == [r.id for r in rs[1:]]


def test_unknown_and_pruned_ids_are_ignored(store: BufferStore, tenant: str, qid: str) -> None:
    rs = [rubric(t, stage="research") for t in "abc"]
    store.add(tenant, qid, question="q", rubrics=rs)
    first = store.prune(tenant, qid, variances={r.id: 0.1 * i for i, r in enumerate(rs)})
    assert first.pruned == [rs[0].id]
    second = store.prune(tenant, qid, variances={rs[0].id: 0.9, "r_unknown": 0.5, rs[1].id: 0.2})
    assert second.ignored == [rs[0].id, "r_unknown"]
    assert second.pruned == []
    assert ids(second.buffer, "research") == [rs[1].id, rs[2].id]


def test_prune_without_buffer_raises(store: BufferStore, tenant: str, qid: str) -> None:
    with pytest.raises(BufferNotFoundError):
        store.prune(tenant, qid, variances={"r_x": 0.1})


def test_noop_prune_keeps_version(store: BufferStore, tenant: str, qid: str) -> None:
    store.add(tenant, qid, question="q", rubrics=[rubric("a")])
    assert store.prune(tenant, qid, variances={"r_gone": 0.1}).buffer.version == 1


def test_pruned_rubric_is_kept_as_history_and_reactivated(
    store: BufferStore, tenant: str, qid: str
) -> None:
    rs = [rubric(t, stage="research") for t in "abc"]
    store.add(tenant, qid, question="q", rubrics=rs)
    out = store.prune(tenant, qid, variances={rs[0].id: 0.0, rs[1].id: 0.5, rs[2].id: 0.6}, step=4)
    assert out.pruned == [rs[0].id]
    with unit_of_work(store.engine, write=False) as session:
        row = session.scalars(select(RubricRow).where(RubricRow.tenant == tenant)).all()
        pruned = {r.id: r for r in row}[rs[0].id]
        assert pruned.pruned_at is not None and pruned.pruned_step == 4
        assert len(row) == 3

    back = store.add(
        tenant, qid, question="q", rubrics=[rs[0].model_copy(update={"weight": 3})], step=7
    )
    research = back.rubrics["research"]
    assert [r.id for r in research] == [rs[1].id, rs[2].id, rs[0].id]  # new insertion order
    assert research[-1].variance is None  # must be measured again before it can be pruned
    assert research[-1].created_step == 7
    assert research[-1].weight == 3
    # Three actives over a cap of 2, the re-activated one unmeasured: the lowest measured goes.
    out = store.prune(tenant, qid, variances={rs[1].id: 0.5, rs[2].id: 0.6})
    assert out.pruned == [rs[1].id]


def test_stats(store: BufferStore, tenant: str, qid: str) -> None:
    before = store.stats()
    rs = [rubric(t, stage="research") for t in "abc"]
    store.add(tenant, qid, question="q", rubrics=rs)
    store.prune(tenant, qid, variances={r.id: 0.1 for r in rs})
    after = store.stats()
    assert after.questions == before.questions + 1
    assert after.rubrics == before.rubrics + 2
    assert after.pruned_rubrics == before.pruned_rubrics + 1
