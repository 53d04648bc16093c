"""The question list over 10,000 questions on PostgreSQL (seeded in bulk by SQL): the first
page and a deep page hold the right rows and counts, for every sort and a search."""

import uuid

import pytest
from sqlalchemy import Engine, text

from rubricate.stagewise.store.schemas import QuestionQuery
from rubricate.stagewise.store.service import BufferStore

N = 10_000
WITH_RUBRICS = range(100, N + 1, 100)
"""Questions 100, 200, …, 10,000 have three rubrics: plan (live), answer (live, pinned),
review (retired)."""


@pytest.fixture(scope="module")
def seeded(pg_engine: Engine) -> str:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    with pg_engine.begin() as conn:
        conn.execute(
            text(
                """
                INSERT INTO questions (tenant, question_id, question, created_at, updated_at,
                                       version)
                SELECT :tenant, 'q-' || lpad(i::text, 5, '0'), 'Question number ' || i,
                       TIMESTAMPTZ '2026-01-01 00:00:00+00',
                       TIMESTAMPTZ '2026-01-01 00:00:00+00' + i * INTERVAL '1 second', 1
                FROM generate_series(1, :n) AS i
                """
            ),
            {"tenant": tenant, "n": N},
        )
        conn.execute(
            text(
                """
                INSERT INTO rubrics (tenant, question_id, id, stage, origin, title, description,
                                     weight, polarity, seq, created_at, pinned_at, pinned_by,
                                     retired_at, retired_by, pruned_at)
                SELECT :tenant, 'q-' || lpad(i::text, 5, '0'), 'r_' || v.stage, v.stage,
                       'active', v.stage, v.stage, 2, 'positive', v.n, now(),
                       CASE WHEN v.pinned THEN now() END, CASE WHEN v.pinned THEN 'ada' END,
                       CASE WHEN v.retired THEN now() END, CASE WHEN v.retired THEN 'ada' END,
                       CASE WHEN v.retired THEN now() END
                FROM generate_series(100, :n, 100) AS i
                CROSS JOIN (VALUES (1, 'plan', false, false), (2, 'answer', true, false),
                                   (3, 'review', false, true)) AS v(n, stage, pinned, retired)
                """
            ),
            {"tenant": tenant, "n": N},
        )
    return tenant


def qid(i: int) -> str:
    return f"q-{i:05d}"


def test_first_and_deep_pages_of_10k_questions(pg_engine: Engine, seeded: str) -> None:
    store = BufferStore(pg_engine)
    first = store.list_questions(seeded, QuestionQuery())
    assert first.total == N and first.limit == 50
    assert [q.question_id for q in first.questions] == [qid(i) for i in range(N, N - 50, -1)]
    top = first.questions[0]
    assert top.per_stage == {"plan": 1, "research": 0, "review": 0, "answer": 1}
    assert (top.rubrics, top.pinned, top.retired) == (2, 1, 1)
    assert first.questions[1].rubrics == 0 and first.questions[1].per_stage["plan"] == 0
    assert top.question == "Question number 10000"

    deep = store.list_questions(seeded, QuestionQuery(sort="question_id", offset=9_900, limit=200))
    assert [q.question_id for q in deep.questions] == [qid(i) for i in range(9_901, N + 1)]
    assert deep.total == N
    counted = {q.question_id: (q.rubrics, q.pinned, q.retired) for q in deep.questions}
    assert counted[qid(10_000)] == counted[qid(9_900 + 100)] == (2, 1, 1)
    assert counted[qid(9_999)] == (0, 0, 0)

    recent_deep = store.list_questions(seeded, QuestionQuery(offset=5_000, limit=3))
    assert [q.question_id for q in recent_deep.questions] == [qid(5_000), qid(4_999), qid(4_998)]


def test_sort_by_rubrics_and_search_over_10k_questions(pg_engine: Engine, seeded: str) -> None:
    store = BufferStore(pg_engine)
    by_size = store.list_questions(seeded, QuestionQuery(sort="rubrics", limit=200))
    got = [q.question_id for q in by_size.questions]
    assert got[:100] == [qid(i) for i in WITH_RUBRICS]  # most live rubrics first, then by id
    assert got[100:] == [qid(i) for i in range(1, 102) if i != 100]  # then the rest, by id

    search = store.list_questions(seeded, QuestionQuery(search="Q-0999", sort="question_id"))
    assert search.total == 10
    assert [q.question_id for q in search.questions] == [qid(i) for i in range(9_990, 10_000)]
    by_text = store.list_questions(seeded, QuestionQuery(search="number 7777"))
    assert [q.question_id for q in by_text.questions] == [qid(7_777)]
    deep_search = store.list_questions(
        seeded, QuestionQuery(search="question number 1", sort="question_id", offset=1_000)
    )
    # "Question number 1…": 1, 10–19, 100–199, 1000–1999, 10000 = 1,112 matches
    assert deep_search.total == 1_112
    assert deep_search.questions[0].question_id == qid(1_889)
