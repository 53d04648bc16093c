"""What the console's pages show, built from API answers: pure data shaping, no I/O.

The routes (`console.routes`) fetch through the public API and hand the answers to these
functions; the templates only lay out what these return.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from markupsafe import Markup

from rubricate.console.charts import Point, line_chart
from rubricate_client.constants import STAGES
from rubricate_client.schemas.audit import AuditSignals, RubricHistoryEntry
from rubricate_client.schemas.rubrics import Judgment, Stage
from rubricate_client.schemas.scorings import StoredScoring
from rubricate_client.stages import stage_spans


@dataclass(frozen=True)
class Piece:
    """A stretch of a trajectory: its stage (None: outside every stage) and its text."""

    stage: Stage | None
    text: str


def trajectory_pieces(trajectory: str) -> list[Piece]:
    """The trajectory cut at its stage spans (the platform's own stage parser), in order,
    so each stage can be highlighted. The text is kept as is: the template escapes it."""
    spans = sorted(
        ((span[0], span[1], stage) for stage, span in stage_spans(trajectory).items() if span),
        key=lambda s: s[0],
    )
    pieces: list[Piece] = []
    at = 0
    for start, end, stage in spans:
        start = max(start, at)
        if start >= end:
            continue
        if start > at:
            pieces.append(Piece(None, trajectory[at:start]))
        pieces.append(Piece(stage, trajectory[start:end]))
        at = end
    if at < len(trajectory):
        pieces.append(Piece(None, trajectory[at:]))
    return pieces


@dataclass(frozen=True)
class JudgmentCell:
    score: int | None
    expected: float | None
    justification: str


@dataclass(frozen=True)
class RubricRow:
    rubric_id: str
    stage: Stage
    title: str
    description: str
    polarity: str
    weight: int
    cells: list[JudgmentCell | None]
    """One per rollout, in the order of `ScoringTable.rollouts` (None: not judged)."""


@dataclass(frozen=True)
class RolloutColumn:
    rollout_id: str
    scores: dict[Stage, float | None] | None
    fallback: str | None
    pieces: list[Piece] | None
    """None when the trajectory was not kept."""


@dataclass(frozen=True)
class ScoringTable:
    scoring: StoredScoring
    rollouts: list[RolloutColumn]
    rows: list[RubricRow]


def scoring_table(scoring: StoredScoring, trajectories: dict[str, str] | None) -> ScoringTable:
    """Rollouts side by side: per rollout its stage scores and trajectory; per rubric of the
    scoring, each rollout's judgment and justification."""
    ids = list(scoring.rollouts)
    columns = [
        RolloutColumn(
            rollout_id=rid,
            scores=scoring.rollouts[rid].scores,
            fallback=scoring.rollouts[rid].fallback,
            pieces=(
                trajectory_pieces(trajectories[rid])
                if trajectories is not None and rid in trajectories
                else None
            ),
        )
        for rid in ids
    ]
    by_rollout: list[dict[str, Judgment]] = [
        {j.rubric_id: j for j in scoring.rollouts[rid].judgments} for rid in ids
    ]
    rows = []
    for rubric in sorted(scoring.rubrics, key=lambda r: STAGES.index(r.stage)):
        cells: list[JudgmentCell | None] = []
        for judged in by_rollout:
            j = judged.get(rubric.id)
            cells.append(
                None
                if j is None
                else JudgmentCell(
                    score=j.score, expected=j.expected_score, justification=j.justification
                )
            )
        rows.append(
            RubricRow(
                rubric_id=rubric.id,
                stage=rubric.stage,
                title=rubric.title,
                description=rubric.description,
                polarity=rubric.polarity,
                weight=rubric.weight,
                cells=cells,
            )
        )
    return ScoringTable(scoring=scoring, rollouts=columns, rows=rows)


def buffer_size_chart(entries: Sequence[RubricHistoryEntry]) -> Markup:
    """Rubrics live in the buffer per stage over training steps, from the rubric history
    (a rubric is live from its added step until its pruned step)."""
    steps = sorted(
        {e.added_step for e in entries if e.added_step is not None}
        | {e.pruned_step for e in entries if e.pruned_step is not None}
    )
    series: dict[str, list[Point]] = {}
    for stage in STAGES:
        of_stage = [e for e in entries if e.stage == stage and e.added_step is not None]
        if not of_stage:
            continue
        series[stage] = [
            (
                float(step),
                float(
                    sum(
                        1
                        for e in of_stage
                        if e.added_step is not None
                        and e.added_step <= step
                        and (e.pruned_step is None or e.pruned_step > step)
                    )
                ),
            )
            for step in steps
        ]
    return line_chart(series, title="Live rubrics per stage over training steps")


@dataclass(frozen=True)
class AuditCharts:
    agreement: Markup
    length: Markup
    addressing: Markup
    refused: Markup


def audit_charts(signals: AuditSignals) -> AuditCharts:
    steps = signals.steps
    return AuditCharts(
        agreement=line_chart(
            {"live vs reference agreement": [(s.step, s.agreement) for s in steps]},
            title="Agreement of the live and reference judges over steps",
            y_range=(0.0, 1.0),
        ),
        length=line_chart(
            {"reward–length r": [(s.step, s.length_reward_correlation) for s in steps]},
            title="Correlation of reward with response length over steps",
            y_range=(-1.0, 1.0),
        ),
        addressing=line_chart(
            {"rollouts addressing the judge": [(s.step, s.addressing_rollouts) for s in steps]},
            title="Rollouts that address the judge, per step",
            y_range=(0.0, float(max([1, *(s.addressing_rollouts for s in steps)]))),
        ),
        refused=line_chart(
            {"refused credit per rollout": [(s.step, s.refused_credit) for s in steps]},
            title="Answer credit refused (text that did not assert it), per step",
            y_range=(0.0, 1.0),
        ),
    )


@dataclass(frozen=True)
class Pages:
    """Pagination of a list: which page, how many, links to the neighbours."""

    offset: int
    limit: int
    total: int
    numbers: list[int] = field(default_factory=list)

    @property
    def page(self) -> int:
        return self.offset // self.limit

    @property
    def last(self) -> int:
        return max(0, (self.total - 1) // self.limit)

    @property
    def has_prev(self) -> bool:
        return self.page > 0

    @property
    def has_next(self) -> bool:
        return self.page < self.last


def pages(offset: int, limit: int, total: int) -> Pages:
    page = offset // limit
    last = max(0, (total - 1) // limit)
    nearby = sorted({0, last, *range(max(0, page - 2), min(last, page + 2) + 1)})
    return Pages(offset=offset, limit=limit, total=total, numbers=nearby)
