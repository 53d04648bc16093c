"""Which scored groups the reference judge re-scores.

The first group of each question is always audited (`first`); any other group is audited
when its draw is below the tenant's fraction (`sampled`). The draw is a hash of the tenant
and the scoring id, uniform in [0, 1): the same group gets the same answer on every replica
and on a retried submission, and a fraction of 0.05 audits about one group in twenty.
"""

import hashlib
from typing import Literal

Reason = Literal["first", "sampled"]


def draw(tenant: str, scoring_id: str) -> float:
    digest = hashlib.sha256(f"{tenant}\x00{scoring_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def audit_reason(
    *, tenant: str, scoring_id: str, fraction: float, first_of_question: bool
) -> Reason | None:
    """Why this group is audited, or None when it is not."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError("fraction must be in [0, 1]")
    if first_of_question:
        return "first"
    if draw(tenant, scoring_id) < fraction:
        return "sampled"
    return None
