"""Rubric curation in the store, on PostgreSQL and on SQLite: pins survive pruning, retired
rubrics never come back, an edit replaces a rubric; every change is recorded with its author."""

import uuid

import pytest
from sqlalchemy import Engine, func, select

from rubricate.audit.store.repository import question_history
from rubricate.db.engine import unit_of_work
from rubricate.stagewise.store.models import RubricCurationRow
from rubricate.stagewise.store.schemas import CurateRubricRequest, QuestionQuery
from rubricate.stagewise.store.service import (
    BufferNotFoundError,
    BufferStore,
    CurationConflictError,
    RubricNotFoundError,
)
from rubricate_client.schemas.buffers import BufferView, RubricCurationResult
from rubricate_client.schemas.curation import RubricAction
from rubricate_client.schemas.rubrics import RubricSpec
from tests.support.rubrics import ids, rubric


@pytest.fixture
def qid() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


def curate(
    store: BufferStore,
    tenant: str,
    qid: str,
    rid: str,
    action: RubricAction,
    *,
    author: str = "ada",
    reason: str | None = None,
    edit: RubricSpec | None = None,
) -> tuple[RubricCurationResult, BufferView]:
    request = CurateRubricRequest(action=action, author=author, reason=reason, edit=edit)
    return store.curate(tenant, qid, rid, request)


def events(engine: Engine, tenant: str, qid: str) -> int:
    with unit_of_work(engine, write=False) as session:
        stmt = select(func.count()).where(
            RubricCurationRow.tenant == tenant, RubricCurationRow.question_id == qid
        )
        return int(session.scalar(stmt) or 0)


def test_a_pinned_rubric_survives_the_prune_that_would_drop_it(
    store: BufferStore, tenant: str, qid: str
) -> None:
    a, b, c = rubric("a"), rubric("b"), rubric("c")
    store.add(tenant, qid, question="q", rubrics=[a, b, c])
    result, view = curate(store, tenant, qid, a.id, "pin", reason="core criterion")
    assert result.rubric.pinned and result.event.action == "pin"
    assert [r.pinned for r in view.rubrics["plan"]] == [True, False, False]
    got = store.get(tenant, qid)
    assert got is not None and got.rubrics["plan"][0].pinned

    out = store.prune(
        tenant, qid, variances={a.id: 0.0, b.id: 0.5, c.id: 0.3}, caps={"plan": 2}, step=5
    )
    assert out.pruned == [c.id]  # "a" has the lowest variance, but it is pinned
    assert ids(out.buffer) == [a.id, b.id]

    curate(store, tenant, qid, a.id, "unpin")
    d = rubric("d")
    store.add(tenant, qid, question="q", rubrics=[d])
    out = store.prune(tenant, qid, variances={a.id: 0.0, b.id: 0.5, d.id: 0.4}, caps={"plan": 2})
    assert out.pruned == [a.id]  # unpinned, it can be pruned again


def test_a_retired_rubric_leaves_the_buffer_and_never_comes_back(
    store: BufferStore, tenant: str, qid: str
) -> None:
    a, b = rubric("a"), rubric("b", stage="answer", origin="persistent")
    first = store.add(tenant, qid, question="q", rubrics=[a, b])
    result, view = curate(store, tenant, qid, a.id, "retire", reason="rewards verbosity")
    assert view.version == first.version + 1
    assert result.buffer_version == view.version
    assert ids(view) == [b.id]
    assert store.get(tenant, qid) == view

    again, outcome = store.add_detailed(tenant, qid, question="q", rubrics=[a], step=9)
    assert outcome.refused == [a.id] and outcome.reactivated == []
    assert ids(again) == [b.id]
    assert again.version == view.version  # nothing changed
    out = store.prune(tenant, qid, variances={a.id: 0.1})
    assert out.ignored == [a.id]  # no longer scored

    # a persistent rubric can be retired too
    _, view = curate(store, tenant, qid, b.id, "retire")
    assert ids(view) == []


def test_a_pruned_rubric_retired_is_not_reactivated(
    store: BufferStore, tenant: str, qid: str
) -> None:
    a, b = rubric("a"), rubric("b")
    store.add(tenant, qid, question="q", rubrics=[a, b])
    assert store.prune(tenant, qid, variances={a.id: 0.0, b.id: 1.0}, caps={"plan": 1}).pruned == [
        a.id
    ]
    curate(store, tenant, qid, a.id, "retire")
    view, outcome = store.add_detailed(tenant, qid, question="q", rubrics=[a])
    assert outcome.refused == [a.id]
    assert ids(view) == [b.id]


def test_an_edit_replaces_the_rubric_and_the_history_says_who(
    store: BufferStore, engine: Engine, tenant: str, qid: str
) -> None:
    old = rubric("cites sources", stage="answer", weight=2)
    store.add(tenant, qid, question="q", rubrics=[old, rubric("other", stage="answer")])
    curate(store, tenant, qid, old.id, "pin", author="grace")
    spec = RubricSpec(
        title="cites primary sources",
        description="Names the primary source of every claim.",
        weight=3,
        polarity="positive",
    )
    result, view = curate(
        store, tenant, qid, old.id, "edit", author="ada", reason="too vague", edit=spec
    )
    new = result.rubric
    assert new.id != old.id and new.id.startswith("r_")
    assert (new.title, new.description, new.weight) == (spec.title, spec.description, 3)
    assert (new.stage, new.origin) == ("answer", "active")
    assert new.pinned  # the edit keeps the pin
    assert result.event.detail == {"replaced_by": new.id}
    assert old.id not in ids(view) and ids(view)[-1] == new.id

    history = question_history(engine, tenant, qid)
    assert history is not None
    by_id = {e.id: e for e in history}
    assert by_id[old.id].replaced_by == new.id
    assert by_id[old.id].retired_by == "ada"
    assert by_id[old.id].pruned_at is not None and not by_id[old.id].pinned
    assert by_id[new.id].created_by == "ada" and by_id[new.id].pinned
    assert by_id[new.id].retired_by is None
    assert next(e for e in history if e.title == "other").created_by is None

    listed = store.curations(tenant, qid)
    assert listed is not None
    assert [(e.action, e.author, e.reason, e.subject) for e in listed.events] == [
        ("edit", "ada", "too vague", old.id),
        ("pin", "grace", None, old.id),
    ]
    assert all(e.question_id == qid and e.target == "rubric" for e in listed.events)
    assert listed.events[0].at >= listed.events[1].at

    # the retired original is not re-activated by a generator proposing it again
    again = store.add(tenant, qid, question="q", rubrics=[old])
    assert old.id not in ids(again)


def test_not_found_and_conflicts_change_nothing(
    store: BufferStore, engine: Engine, tenant: str, qid: str
) -> None:
    a, b = rubric("a"), rubric("b")
    store.add(tenant, qid, question="q", rubrics=[a, b])
    with pytest.raises(BufferNotFoundError):
        curate(store, tenant, "no-such-question", a.id, "pin")
    with pytest.raises(RubricNotFoundError, match="no rubric 'r_missing'"):
        curate(store, tenant, qid, "r_missing", "pin")
    with pytest.raises(CurationConflictError, match="not pinned"):
        curate(store, tenant, qid, a.id, "unpin")
    into_b = RubricSpec(title="b", description="The response b.")
    with pytest.raises(CurationConflictError, match="already taken"):
        curate(store, tenant, qid, a.id, "edit", edit=into_b)
    weight_only = RubricSpec(title="a", description="The response a.", weight=1)
    with pytest.raises(CurationConflictError, match="not the weight"):
        curate(store, tenant, qid, a.id, "edit", edit=weight_only)
    before = store.get(tenant, qid)
    assert before is not None and events(engine, tenant, qid) == 0

    curate(store, tenant, qid, a.id, "retire")
    with pytest.raises(CurationConflictError, match="retired"):
        curate(store, tenant, qid, a.id, "retire")
    with pytest.raises(CurationConflictError, match="retired"):
        curate(store, tenant, qid, a.id, "pin")
    assert events(engine, tenant, qid) == 1
    after = store.get(tenant, qid)
    assert after is not None and after.version == before.version + 1

    c, d = rubric("c"), rubric("d")
    store.add(tenant, qid, question="q", rubrics=[c, d])
    variances = {b.id: 0.0, c.id: 0.5, d.id: 0.5}
    assert store.prune(tenant, qid, variances=variances, caps={"plan": 2}).pruned == [b.id]
    with pytest.raises(CurationConflictError, match="pruned"):
        curate(store, tenant, qid, b.id, "pin")


def test_another_tenant_cannot_see_or_curate_the_question(
    store: BufferStore, tenant: str, qid: str
) -> None:
    a = rubric("a")
    store.add(tenant, qid, question="Mine?", rubrics=[a])
    other = f"{tenant}-b"
    with pytest.raises(BufferNotFoundError):
        curate(store, other, qid, a.id, "retire")
    assert store.curations(other, qid) is None
    listing = store.list_questions(other, query())
    assert listing.total == 0 and listing.questions == []
    view = store.get(tenant, qid)
    assert view is not None and ids(view) == [a.id]


def query(**values: object) -> QuestionQuery:
    return QuestionQuery.model_validate(values)


def test_the_question_list_searches_sorts_and_pages(store: BufferStore, tenant: str) -> None:
    store.add(tenant, "alpha", question="Why is the sky blue?", rubrics=[rubric("a1")])
    store.add(
        tenant,
        "beta",
        question="What is 50% of ten?",
        rubrics=[rubric("b1"), rubric("b2", stage="answer"), rubric("b3", stage="review")],
    )
    store.add(tenant, "gamma", question="Sky colour at dusk", rubrics=[rubric("g1"), rubric("g2")])
    store.add(f"{tenant}-other", "delta", question="Sky?", rubrics=[rubric("x")])
    curate(store, tenant, "beta", rubric("b1").id, "pin")
    curate(store, tenant, "beta", rubric("b3", stage="review").id, "retire")
    store.add(tenant, "gamma", question="Sky colour at dusk", rubrics=[rubric("g3")])

    recent = store.list_questions(tenant, query())
    assert [q.question_id for q in recent.questions] == ["gamma", "beta", "alpha"]
    assert (recent.total, recent.offset, recent.limit) == (3, 0, 50)
    beta = recent.questions[1]
    assert beta.per_stage == {"plan": 1, "research": 0, "review": 0, "answer": 1}
    assert (beta.rubrics, beta.pinned, beta.retired, beta.version) == (2, 1, 1, 3)
    assert beta.question == "What is 50% of ten?"
    assert recent.questions[0].rubrics == 3 and recent.questions[0].updated_at >= beta.updated_at

    by_id = store.list_questions(tenant, query(sort="question_id"))
    assert [q.question_id for q in by_id.questions] == ["alpha", "beta", "gamma"]
    by_size = store.list_questions(tenant, query(sort="rubrics"))
    assert [q.question_id for q in by_size.questions] == ["gamma", "beta", "alpha"]

    sky = store.list_questions(tenant, query(search="SKY", sort="question_id"))
    assert [q.question_id for q in sky.questions] == ["alpha", "gamma"] and sky.total == 2
    by_key = store.list_questions(tenant, query(search="et"))
    assert [q.question_id for q in by_key.questions] == ["beta"]
    percent = store.list_questions(tenant, query(search="50%"))
    assert [q.question_id for q in percent.questions] == ["beta"]
    assert store.list_questions(tenant, query(search="%")).total == 1  # a literal %, not a wildcard
    assert store.list_questions(tenant, query(search="_")).total == 0

    page = store.list_questions(tenant, query(sort="question_id", offset=1, limit=1))
    assert [q.question_id for q in page.questions] == ["beta"]
    assert (page.total, page.offset, page.limit) == (3, 1, 1)
    past = store.list_questions(tenant, query(offset=10))
    assert past.questions == [] and past.total == 3
