"""Paper defaults, in one place, each with the section it comes from.

Every value here is a default: requests and settings can override it.
"""

from typing import Final, Literal

Stage = Literal["plan", "research", "review", "answer"]

# RubricEM §3.3: K = 4 semantic stages, in causal order.
STAGES: Final[tuple[Stage, ...]] = ("plan", "research", "review", "answer")
N_STAGES: Final = len(STAGES)

# RubricEM App. C.3: rubric scores are 0/1/2 (absent / partial / full).
SCORE_MIN: Final = 0
SCORE_MAX: Final = 2

# RubricEM App. C.2: rubric weights 1 = minor, 2 = important, 3 = critical.
WEIGHT_MIN: Final = 1
WEIGHT_MAX: Final = 3

# RubricEM App. C.4: per-stage caps on active (judge-generated) rubrics.
ACTIVE_CAPS: Final[dict[Stage, int]] = {"plan": 3, "research": 2, "review": 2, "answer": 3}

# RubricEM App. C.2: target counts of new rubrics per stage (targets, not quotas).
GENERATION_TARGETS: Final[dict[Stage, tuple[int, int]]] = {
    "plan": (1, 4),
    "research": (1, 4),
    "review": (1, 4),
    "answer": (2, 5),
}

# DESIGN.md "Key behaviours": the default causal stage-dependence matrix Λ (RubricEM §3.3).
DEFAULT_LAMBDA: Final = (
    (1.0, 0.4, 0.6, 0.8),
    (0.0, 1.0, 0.4, 0.8),
    (0.0, 0.0, 1.0, 0.8),
    (0.0, 0.0, 0.0, 1.0),
)

# RubricEM §3.3: ε in the per-stage group normalization of returns.
ADVANTAGE_EPS: Final = 1e-6

# RubricEM App. C.4: exponential-backoff retries on judge calls (up to 5 retries).
JUDGE_MAX_RETRIES: Final = 5

# --- step rubrics and listwise rewards (Co-ReAct, ARCO) -------------------------------------

# ARCO (K-sensitivity study, K = 3 default) and Co-ReAct §3.2: criteria per step rubric.
STEP_RUBRIC_K: Final = 3
# Upper bound on criteria per step rubric accepted anywhere (Rubricate's limit).
STEP_RUBRIC_MAX_K: Final = 10
# Co-ReAct §3.3, App. A: a step passes verification when its weighted satisfied fraction
# reaches τ = 0.5 (the paper says "exceeds"; the issue fixes ≥), with at most one retry.
STEP_PASS_THRESHOLD: Final = 0.5
STEP_MAX_RETRIES: Final = 1
# Co-ReAct App. A: listwise reward weights (w1, w2, w3) for r_rank, r_atom, r_fmt.
LISTWISE_WEIGHTS: Final = (0.75, 0.15, 0.10)
# Co-ReAct App. A: the reward is zeroed when the rubric's 4-gram repetition rate exceeds 40%.
REPETITION_NGRAM: Final = 4
REPETITION_MAX_RATE: Final = 0.40
# Co-ReAct §3.1, App. A: slates of k = 4 candidates, relabelled {X, Y, Z, W}, ranked by J = 3
# judges; a branching point is kept when at least 2 judges return a parseable ranking.
SLATE_SIZE: Final = 4
NEUTRAL_LABELS: Final = "XYZWVUTSRQPN"
RANK_JUDGES: Final = 3
RANK_MIN_VALID_JUDGES: Final = 2
# Co-ReAct App. A: G = 8 rubrics sampled per branching point for GRPO.
LISTWISE_GROUP_SIZE: Final = 8

# Storage bound, not a paper default: a training step must fit the store's signed 64-bit
# column (found by the schemathesis fuzz run: larger values overflowed the database).
MAX_STEP: Final = 2**63 - 1
