"""Which scored groups the reference judge re-scores.

A group is audited when its draw is below the tenant's fraction (`sampled`), and a question
with no audited group yet gets its group audited (`first`) while the audit's share of the
judge work allows it. The draw is a hash of the tenant and the scoring id, uniform in
[0, 1): the same group gets the same answer on every replica and on a retried submission,
and a fraction of 0.05 audits about one group in twenty.

The share: the groups audited among those of the same training step (the tenant's groups
without a step, for groups without one) stay within `max(max_share, fraction)` of them,
the group being decided included, and at least one (the step's first group is audited).
In a first epoch every question is new: without the share every group would be a question's
first and every one audited; with it, about one group in 1/share is, and a question whose
first groups were not audited gets a later one audited, its first audited group.
"""

import hashlib
import math
from typing import Literal

Reason = Literal["first", "sampled"]


def draw(tenant: str, scoring_id: str) -> float:
    digest = hashlib.sha256(f"{tenant}\x00{scoring_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def within_share(*, seen: int, audited: int, share: float) -> bool:
    """True when one more audited group keeps `audited + 1` within `share` of the `seen + 1`
    groups (this one included), or when none is audited yet."""
    if not 0.0 <= share <= 1.0:
        raise ValueError("share must be in [0, 1]")
    return audited + 1 <= max(1, math.floor(share * (seen + 1) + 1e-9))


def audit_reason(
    *,
    tenant: str,
    scoring_id: str,
    fraction: float,
    question_audited: bool,
    seen: int = 0,
    audited: int = 0,
    max_share: float = 1.0,
) -> Reason | None:
    """Why this group is audited, or None when it is not.

    `question_audited`: the tenant has an audited group of this question already; `seen`,
    `audited`: the groups of this group's step so far, and how many of them were audited;
    `max_share`: the most of them the audit takes (the fraction, if larger, wins)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError("fraction must be in [0, 1]")
    sampled = draw(tenant, scoring_id) < fraction
    if not question_audited and (
        sampled or within_share(seen=seen, audited=audited, share=max(max_share, fraction))
    ):
        return "first"
    if sampled:
        return "sampled"
    return None
