"""Prometheus metrics, defined once per process with small fixed label sets."""

from prometheus_client import Counter, Histogram

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
    "Scoring fallbacks by kind (no_new_rubrics | answer_only | unscored).",
    ["kind"],
)
