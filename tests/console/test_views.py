"""What the console's pages show (`console.views`, `console.charts`): stage highlighting keeps
the trajectory's text whole, charts escape their text, pagination."""

from datetime import UTC, datetime

from rubricate.console.charts import line_chart
from rubricate.console.views import pages, scoring_table, trajectory_pieces
from rubricate_client.schemas.rubrics import Judgment, RubricView
from rubricate_client.schemas.scorings import ScoredRollout, StoredScoring

TRAJECTORY = (
    "<think>scope</think><structured_plan>p</structured_plan>"
    '\n<call_tool name="search">q</call_tool><tool_output>o</tool_output>'
    "\n<think>audit</think><review>gaps</review>\n<answer>final</answer>"
)


def test_stage_pieces_cover_the_trajectory_in_order() -> None:
    pieces = trajectory_pieces(TRAJECTORY)
    assert "".join(p.text for p in pieces) == TRAJECTORY
    assert [p.stage for p in pieces if p.stage] == ["plan", "research", "review", "answer"]
    assert pieces[-1].stage == "answer" and pieces[-1].text == "<answer>final</answer>"


def test_a_trajectory_without_stages_is_one_plain_piece() -> None:
    text = "no tags <script>alert(1)</script>"
    pieces = trajectory_pieces(text)
    assert "".join(p.text for p in pieces) == text
    assert all(p.stage in (None, "research") for p in pieces)


def test_chart_text_is_escaped() -> None:
    svg = str(line_chart({"<b>x</b>": [(1, 0.5), (2, None), (3, 0.7)]}, title="t<script>"))
    assert "<script>" not in svg and "t&lt;script&gt;" in svg and "&lt;b&gt;x&lt;/b&gt;" in svg
    assert svg.count("<circle") == 2 and "<polyline" not in svg  # the gap splits the line
    assert "no data yet" in str(line_chart({"a": [(1, None)]}, title="empty"))


def test_scoring_table_puts_judgments_under_their_rollouts() -> None:
    rubric = RubricView(
        id="r1", stage="answer", title="T", description="D", polarity="positive", weight=2
    )
    scoring = StoredScoring(
        scoring_id="s1",
        question_id="q",
        question="Q?",
        rubrics=[rubric],
        rollouts={
            "a": ScoredRollout(
                scores={"answer": 1.0},
                judgments=[Judgment(rubric_id="r1", stage="answer", score=2, justification="good")],
            ),
            "b": ScoredRollout(scores=None, judgments=[], fallback="unscored"),
        },
        created_at=datetime.now(UTC),
    )
    table = scoring_table(scoring, {"a": TRAJECTORY})
    assert [c.rollout_id for c in table.rollouts] == ["a", "b"]
    assert table.rollouts[0].pieces is not None and table.rollouts[1].pieces is None
    (row,) = table.rows
    assert row.cells[0] is not None and row.cells[0].justification == "good"
    assert row.cells[1] is None


def test_pages() -> None:
    p = pages(offset=500, limit=50, total=10_000)
    assert (p.page, p.last, p.has_prev, p.has_next) == (10, 199, True, True)
    assert p.numbers == [0, 8, 9, 10, 11, 12, 199]
    assert not pages(0, 50, 0).has_next and pages(0, 50, 0).numbers == [0]


def test_training_steps_get_whole_ticks() -> None:
    svg = str(line_chart({"a": [(1, 0.5), (2, 0.7)]}, title="t"))
    assert ">1.25<" not in svg and ">1<" in svg and ">2<" in svg
