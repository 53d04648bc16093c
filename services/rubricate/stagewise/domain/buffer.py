"""Rubric-buffer policy (RubricEM App. C.1, C.4) and the rules of human curation.

Persistent rubrics are never pruned. Active rubrics are capped per stage; after a group is
scored, the stage's actives over the cap with the lowest score variance (least
discriminative) are pruned. Only rubrics that have a measured variance can be pruned: a
rubric added by a concurrent group and not yet scored is kept until it has been measured.
Ties go against the older rubric (the staler criterion).

A person may pin a rubric (never pruned while pinned: it still counts toward its stage's cap,
and the next unpinned rubric is pruned in its place), retire one (no longer scored, and
never re-activated when a generator proposes it again) or edit one (the old is retired and
replaced by a new rubric with the edited text).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rubricate_client.constants import ACTIVE_CAPS, STAGES
from rubricate_client.schemas.curation import RubricAction
from rubricate_client.schemas.rubrics import Rubric, Stage


def variance(values: Sequence[float]) -> float:
    """Population variance; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values)


def select_prunes(
    rubrics: Iterable[Rubric],
    *,
    caps: Mapping[Stage, int] = ACTIVE_CAPS,
) -> list[str]:
    """Ids of active rubrics to remove so each stage is within its cap.

    `rubrics` is the buffer in insertion order (oldest first). A pinned rubric counts toward
    its stage's cap but is never selected: the lowest-variance unpinned one goes instead.
    """
    pruned: list[str] = []
    by_stage: dict[Stage, list[tuple[int, Rubric]]] = {s: [] for s in STAGES}
    for order, rubric in enumerate(rubrics):
        if rubric.origin == "active":
            by_stage[rubric.stage].append((order, rubric))
    for stage in STAGES:
        actives = by_stage[stage]
        excess = len(actives) - caps[stage]
        if excess <= 0:
            continue
        measured = [
            (r.variance, order, r.id)
            for order, r in actives
            if r.variance is not None and not r.pinned
        ]
        measured.sort()
        pruned.extend(rid for _, _, rid in measured[:excess])
    return pruned


@dataclass(frozen=True)
class RubricState:
    """Where a stored rubric stands, as curation sees it."""

    pinned: bool
    pruned: bool
    """Out of the buffer (pruned by variance, or retired)."""
    retired: bool


def curation_conflict(action: RubricAction, state: RubricState) -> str | None:
    """Why `action` cannot apply to a rubric in `state` (a conflict), or None when it can.

    A retired rubric takes no further curation. Pin, unpin and edit need a rubric in the
    buffer; retire also takes a pruned rubric, so a generator can never bring it back.
    """
    if state.retired:
        return f"cannot {action}: the rubric is retired"
    if action == "retire":
        return None
    if state.pruned:
        return f"cannot {action}: the rubric was pruned and is not in the buffer"
    if action == "pin" and state.pinned:
        return "cannot pin: the rubric is already pinned"
    if action == "unpin" and not state.pinned:
        return "cannot unpin: the rubric is not pinned"
    return None
