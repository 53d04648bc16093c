"""Rubric-buffer policy (RubricEM App. C.1, C.4).

Persistent rubrics are never pruned. Active rubrics are capped per stage; after a group is
scored, the stage's actives over the cap with the lowest score variance (least
discriminative) are pruned. Only rubrics that have a measured variance can be pruned: a
rubric added by a concurrent group and not yet scored is kept until it has been measured.
Ties go against the older rubric (the staler criterion).
"""

from collections.abc import Iterable, Mapping, Sequence

from rubricate_client.constants import ACTIVE_CAPS, STAGES
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

    `rubrics` is the buffer in insertion order (oldest first).
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
        measured = [(r.variance, order, r.id) for order, r in actives if r.variance is not None]
        measured.sort()
        pruned.extend(rid for _, _, rid in measured[:excess])
    return pruned
