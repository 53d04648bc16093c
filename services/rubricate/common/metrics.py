"""Prometheus metrics, defined once per process with small fixed label sets.

docs/observability.md lists every metric with its labels and where it is recorded; the
Grafana dashboards and alert rules under deploy/ may query only what is defined here (checked
by tests/deploy). Values of the `task` label of JUDGE_LATENCY / LLM_TOKENS / LLM_RETRIES /
PARSE_FAILURES are the names in JUDGE_TASKS.
"""

import os

# A Celery worker with the prefork pool exports through prometheus-client's multiprocess mode
# (rubricate.common.celery_observability): metric files live in this directory, which must
# exist before the first metric value is created.
_MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if _MULTIPROC_DIR:
    os.makedirs(_MULTIPROC_DIR, exist_ok=True)

from prometheus_client import Counter, Gauge, Histogram  # noqa: E402

JUDGE_TASKS = (
    "stage_rubric_generation",
    "stage_scoring",
    "nugget_verification",
    "reflection_judging",
    "step_rubric_generation",
    "step_verify",
    "listwise_rank",
    "query_rewrites",
    "query_duplicate",
    "temporal_check",
    "nugget_extraction",
    "nugget_merge",
    "nugget_importance",
    "unit_reading",
)
"""The `task` label values of the judge metrics, one per judge task family."""

_LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)

HTTP_LATENCY = Histogram(
    "rubricate_http_request_duration_seconds",
    "HTTP request latency by service, route template, method and status.",
    ["service", "route", "method", "status"],
    buckets=_LATENCY_BUCKETS,
)
JUDGE_LATENCY = Histogram(
    "rubricate_judge_latency_seconds",
    "Latency of one judge task (LLM call plus parsing) by task, stage and backend.",
    ["task", "stage", "backend"],
    buckets=_LATENCY_BUCKETS,
)
LLM_TOKENS = Counter(
    "rubricate_llm_tokens_total",
    "LLM tokens by task, backend and kind (prompt | completion).",
    ["task", "backend", "kind"],
)
LLM_RETRIES = Counter(
    "rubricate_llm_retries_total",
    "LLM call retries by task and reason (transport | repair).",
    ["task", "reason"],
)
PARSE_FAILURES = Counter(
    "rubricate_llm_parse_failures_total",
    "Model outputs that failed to parse even after the repair retry, by task.",
    ["task"],
)
FALLBACKS = Counter(
    "rubricate_fallbacks_total",
    "Scoring fallbacks by kind (no_new_rubrics | answer_only | unscored | step_unscored | "
    "rubric_unscored | judge_dropped | no_rubrics | stage_unscored | scoring_not_stored | "
    "sample_unscored | nugget_unscored | reflection_unscored).",
    ["kind"],
)

REFUSED_VERDICTS = Counter(
    "rubricate_refused_verdicts_total",
    "Answer verdicts the platform refused because their evidence was not an assertion "
    "carrying the rubric, or the answer asserted nothing (issue 32: reward-hacking signal).",
)
REFUSED_CREDIT = Histogram(
    "rubricate_refused_credit",
    "Per scored rollout, the R_answer its refused verdicts would have added (0 when none).",
    buckets=(0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0),
)

# ----------------------------------------------------------------------------- miner (Celery)
_JOB_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0)

JOB_DURATION = Histogram(
    "rubricate_job_duration_seconds",
    "Duration of one Celery task run by task name and outcome (success | failure | retry).",
    ["task", "outcome"],
    buckets=_JOB_BUCKETS,
)
QUEUE_DEPTH_METRIC = "rubricate_queue_depth"
"""Messages waiting in a Celery queue on the Redis broker, by queue. Exported by
`rubricate.common.queue_metrics.QueueDepthCollector` (read from Redis at scrape time)."""
QUEUE_BROKER_UP_METRIC = "rubricate_queue_broker_up"
"""1 when the last queue-depth read reached the broker, else 0 (same collector)."""
COLLECTED_METRICS: dict[str, tuple[str, ...]] = {
    QUEUE_DEPTH_METRIC: ("queue",),
    QUEUE_BROKER_UP_METRIC: (),
}
"""Gauges produced by custom collectors rather than defined as metric objects here."""

# ------------------------------------------------------------------------------------ store
CACHE_LOOKUPS = Counter(
    "rubricate_store_cache_lookups_total",
    "Buffer cache lookups by result (hit | miss | error | bypass).",
    ["result"],
)
CACHE_UP = Gauge("rubricate_store_cache_up", "1 while the buffer cache answers, else 0.")
BUFFER_RUBRICS = Gauge(
    "rubricate_buffer_rubrics",
    "Live (not pruned) rubrics in the judge rubric buffers, all tenants, by stage and origin "
    "(persistent | active). Refreshed by the store from the database.",
    ["stage", "origin"],
)
BUFFER_QUESTIONS = Gauge(
    "rubricate_buffer_questions",
    "Questions with a judge rubric buffer, all tenants. Refreshed by the store.",
)
BANK_ITEMS = Gauge(
    "rubricate_bank_items",
    "Items in the agent rubric bank (one per question), all tenants. Refreshed by the store.",
)

# -------------------------------------------------------------------------------- upstreams
UPSTREAM_ERRORS = Counter(
    "rubricate_upstream_errors_total",
    "Failed calls from the gateway to an upstream service (each attempt, retried or not), "
    "by upstream and kind (unreachable | status_5xx | invalid_response).",
    ["upstream", "kind"],
)
GRPC_LATENCY = Histogram(
    "rubricate_grpc_request_duration_seconds",
    "gRPC call latency on the gateway by method and status code.",
    ["method", "code"],
    buckets=_LATENCY_BUCKETS,
)
IDEMPOTENT_REPLAYS = Counter(
    "rubricate_idempotent_replays_total",
    "Gateway requests answered from a stored first result (Idempotency-Key).",
)
TENANT_THROTTLED = Counter(
    "rubricate_tenant_throttled_total",
    "Gateway requests refused with 429 because the tenant had too many in flight.",
)
REDIS_COMMANDS = Counter(
    "rubricate_redis_commands_total",
    "Commands this process sent to Redis (a Lua script counts once), by client "
    "(rendezvous | idempotency | buffer_cache | judge_cache).",
    ["client"],
)
GROUP_WAITERS = Gauge(
    "rubricate_group_waiters",
    "/get_reward samples waiting on this gateway for their group to be gathered or scored.",
)
PENDING_ROLLOUTS = Gauge(
    "rubricate_pending_rollouts",
    "Rollouts admitted and not yet answered on this gateway replica, all tenants.",
)
EVENT_LOOP_LAG = Histogram(
    "rubricate_event_loop_lag_seconds",
    "How late the service's event loop ran a timer (sampled every 50 ms by "
    "rubricate.common.loop_lag): the time a ready task waits for the loop, by service.",
    ["service"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
JUDGE_CACHE = Counter(
    "rubricate_judge_cache_total",
    "Deterministic (temperature 0) judge calls by cache result "
    "(hit | miss | coalesced | error | bypass).",
    ["result"],
)
CIRCUIT_OPEN = Gauge(
    "rubricate_llm_circuit_open",
    "1 while the circuit breaker in front of a model backend is open (calls fail fast).",
    ["backend"],
)
LLM_JUDGE_LIMIT = Gauge(
    "rubricate_llm_concurrency_limit",
    "Judge calls a model backend may have in flight now (the adaptive or fixed limit of "
    "rubricate.llm.limiter), by backend and judge (live | reference).",
    ["backend", "judge"],
)
LLM_JUDGE_IN_FLIGHT = Gauge(
    "rubricate_llm_in_flight",
    "Judge calls (or whole requests, where the backend takes requests) holding a place in "
    "a model backend's limiter, by backend and judge.",
    ["backend", "judge"],
)
LLM_JUDGE_QUEUED = Gauge(
    "rubricate_llm_queued",
    "Judge calls waiting for a place in a model backend's limiter, by backend, judge and "
    "lane (live | background: the audit's reference judge on the live model).",
    ["backend", "judge", "lane"],
)
LLM_JUDGE_BACKOFFS = Counter(
    "rubricate_llm_limit_backoffs_total",
    "Times a model backend's adaptive limit backed off, by backend, judge and reason "
    "(rate_limited | server_error | transport | latency).",
    ["backend", "judge", "reason"],
)

# ------------------------------------------------------------------------------------ audit
# The reward audit (rubricate.audit, docs/audit.md). No tenant or question label (both
# unbounded): per-tenant and per-question figures are on GET /v1/audit/signals; the gauges
# carry the worst tenant's value, recomputed from the database by the miner API.
_UNIT_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
AUDIT_GROUPS = Counter(
    "rubricate_audit_groups_total",
    "Scored groups seen by the audit, by outcome (skipped | pending | done | failed).",
    ["outcome"],
)
AUDIT_SUBMIT_FAILURES = Counter(
    "rubricate_audit_submit_failures_total",
    "Scored groups the gateway could not hand to the audit (the trainer's answer stands).",
)
AUDIT_AGREEMENT = Histogram(
    "rubricate_audit_group_agreement",
    "Agreement of the reference judge with the live judge on one audited group (0..1).",
    buckets=_UNIT_BUCKETS,
)
AUDIT_RANK_TAU = Histogram(
    "rubricate_audit_rank_tau",
    "Kendall's tau of the rollouts' rewards under both judges, per audited group.",
    buckets=(-1.0, -0.5, 0.0, 0.25, 0.5, 0.75, 0.9, 1.0),
)
AUDIT_AGREEMENT_LAST = Gauge(
    "rubricate_audit_agreement_min",
    "Lowest mean agreement of the latest audited step, over tenants (NaN: no audit yet).",
)
AUDIT_AGREEMENT_DROP = Gauge(
    "rubricate_audit_agreement_drop_max",
    "Largest drop of agreement between the first and the last audited steps, over tenants.",
)
AUDIT_GAMING_CANDIDATES = Gauge(
    "rubricate_audit_gaming_candidates",
    "Rubrics whose live mean rises over the steps while the reference's does not, all tenants.",
)
AUDIT_LENGTH_CORRELATION = Gauge(
    "rubricate_audit_length_correlation_max",
    "Largest correlation of reward with trajectory length at the latest step, over tenants.",
)
AUDIT_ADDRESSING_FLAGGED = Gauge(
    "rubricate_audit_addressing_flagged",
    "Items of nugget, step, listwise, rank and reflection requests that addressed the judge, "
    "within the audit's addressing window, all tenants, by kind.",
    ["kind"],
)
AUDIT_ADDRESSING_ROLLOUTS = Gauge(
    "rubricate_audit_addressing_rollouts",
    "Rollouts whose trajectory addresses the judge, within the signal window, all tenants.",
)
