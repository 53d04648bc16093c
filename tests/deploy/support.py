"""Helpers of the deployment-file tests: paths, tools, Compose interpolation, a PromQL scanner,
a Dockerfile reader, a .dockerignore matcher and a throwaway HTTP server."""

import fnmatch
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKER_DIR = ROOT / "deploy" / "docker"
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
GRAFANA_DIR = ROOT / "deploy" / "grafana"
DASHBOARD_FILE = GRAFANA_DIR / "dashboards" / "judge-latency.json"
"""The home dashboard (Grafana's default); every dashboard is in DASHBOARD_FILES."""
DASHBOARD_FILES = sorted((GRAFANA_DIR / "dashboards").glob("*.json"))
CHART_DIR = ROOT / "helm" / "rubricate"
INSTALL_TOOLS = "python deploy/scripts/install_deploy_tools.py"

# ------------------------------------------------------------------------------------- metrics
# The metrics the services export (services/rubricate/common/metrics.py), with their labels.
# Dashboards and alerts may use these and nothing else (plus `up` in alerts).
HISTOGRAMS: dict[str, frozenset[str]] = {
    "rubricate_refused_credit": frozenset(),
    "rubricate_judge_latency_seconds": frozenset({"task", "stage", "backend"}),
    "rubricate_http_request_duration_seconds": frozenset({"service", "route", "method", "status"}),
    "rubricate_job_duration_seconds": frozenset({"task", "outcome"}),
    "rubricate_grpc_request_duration_seconds": frozenset({"method", "code"}),
    "rubricate_audit_group_agreement": frozenset(),
    "rubricate_audit_rank_tau": frozenset(),
    "rubricate_event_loop_lag_seconds": frozenset({"service"}),
}
COUNTERS: dict[str, frozenset[str]] = {
    "rubricate_fallbacks_total": frozenset({"kind"}),
    "rubricate_refused_verdicts_total": frozenset(),
    "rubricate_llm_tokens_total": frozenset({"task", "backend", "kind"}),
    "rubricate_llm_retries_total": frozenset({"task", "reason"}),
    "rubricate_llm_parse_failures_total": frozenset({"task"}),
    "rubricate_store_cache_lookups_total": frozenset({"result"}),
    "rubricate_upstream_errors_total": frozenset({"upstream", "kind"}),
    "rubricate_idempotent_replays_total": frozenset(),
    "rubricate_tenant_throttled_total": frozenset(),
    "rubricate_judge_cache_total": frozenset({"result"}),
    "rubricate_audit_groups_total": frozenset({"outcome"}),
    "rubricate_audit_submit_failures_total": frozenset(),
    "rubricate_llm_limit_backoffs_total": frozenset({"backend", "judge", "reason"}),
    "rubricate_redis_commands_total": frozenset({"client"}),
}
GAUGES: dict[str, frozenset[str]] = {
    "rubricate_store_cache_up": frozenset(),
    "rubricate_buffer_rubrics": frozenset({"stage", "origin"}),
    "rubricate_buffer_questions": frozenset(),
    "rubricate_bank_items": frozenset(),
    "rubricate_llm_circuit_open": frozenset({"backend"}),
    "rubricate_llm_concurrency_limit": frozenset({"backend", "judge"}),
    "rubricate_llm_in_flight": frozenset({"backend", "judge"}),
    "rubricate_audit_addressing_flagged": frozenset({"kind"}),
    "rubricate_group_waiters": frozenset(),
    "rubricate_pending_rollouts": frozenset(),
    "rubricate_llm_queued": frozenset({"backend", "judge", "lane"}),
    "rubricate_audit_agreement_min": frozenset(),
    "rubricate_audit_agreement_drop_max": frozenset(),
    "rubricate_audit_gaming_candidates": frozenset(),
    "rubricate_audit_length_correlation_max": frozenset(),
    "rubricate_audit_addressing_rollouts": frozenset(),
    # from rubricate.common.queue_metrics.QueueDepthCollector
    "rubricate_queue_depth": frozenset({"queue"}),
    "rubricate_queue_broker_up": frozenset(),
}
ALLOWED_METRICS: dict[str, frozenset[str]] = {
    **{f"{name}_bucket": labels | {"le"} for name, labels in HISTOGRAMS.items()},
    **{f"{name}_count": labels for name, labels in HISTOGRAMS.items()},
    **{f"{name}_sum": labels for name, labels in HISTOGRAMS.items()},
    **COUNTERS,
    **GAUGES,
}
# Labels Prometheus attaches to every scraped series (job, instance) or that our scrape
# configs add (component).
TARGET_LABELS = frozenset({"job", "instance", "component"})


# --------------------------------------------------------------------------------------- tools
def tool(name: str) -> str:
    """Path of a command-line tool, from the venv's bin directory or PATH.

    Missing: the test skips, or fails when RUBRICATE_REQUIRE_DEPLOY_TOOLS is set (the project's
    setup installs the tools and expects them).
    """
    local = Path(sys.executable).parent / name
    candidates = [str(local)] if local.is_file() and os.access(local, os.X_OK) else []
    on_path = shutil.which(name)
    if on_path:
        candidates.append(on_path)
    for candidate in candidates:
        if name != "docker-compose" or _is_compose_v2(candidate):
            return candidate
    message = (
        f"{name} is not installed; `{INSTALL_TOOLS}` installs helm, docker-compose (v2), "
        f"hadolint and promtool into {local.parent}"
    )
    if os.environ.get("RUBRICATE_REQUIRE_DEPLOY_TOOLS", "").lower() not in ("", "0", "false"):
        pytest.fail(f"RUBRICATE_REQUIRE_DEPLOY_TOOLS is set but {message}")
    pytest.skip(message)


def _is_compose_v2(path: str) -> bool:
    out = subprocess.run([path, "version", "--short"], capture_output=True, text=True, timeout=30)
    return out.returncode == 0 and out.stdout.strip().lstrip("v").startswith("2.")


def run(cmd: list[str], *, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, **kwargs
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"{' '.join(cmd)} exited {result.returncode}\n"
            f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
        )
    return result


def load_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


# ------------------------------------------------------------------------- compose interpolation
_INTERPOLATION = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?-)(?P<default>[^}]*))?\}"
)


def interpolate(value: str) -> str:
    """Compose's variable interpolation with every variable unset: `${X:-d}` and `${X-d}` give
    `d`, `${X}` gives "", `$$` gives `$`."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return match.group("default") or ""

    return _INTERPOLATION.sub(replace, value)


def interpolated(node: Any) -> Any:
    if isinstance(node, str):
        return interpolate(node)
    if isinstance(node, list):
        return [interpolated(item) for item in node]
    if isinstance(node, dict):
        return {key: interpolated(value) for key, value in node.items()}
    return node


# ------------------------------------------------------------------------------ PromQL scanning
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_AGGREGATORS = {
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
}  # may be followed by by/without instead of "("
_KEYWORDS = (
    {"and", "or", "unless", "offset", "bool", "inf", "nan", "atan2"} | _GROUPING | _AGGREGATORS
)
_TOKEN = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      |(?P<matchers>\{(?:[^}"']|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')*\})
      |(?P<range>\[[^\]]*\])
      |(?P<number>\d+(?:\.\d+)?(?:e[+-]?\d+)?[smhdwy]?)
      |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
      |(?P<open>\()
      |(?P<other>\S)""",
    re.VERBOSE,
)
_MATCHER = re.compile(
    r"""\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*,?"""
)
_GRAFANA_VARIABLE = re.compile(r"\$__(rate_interval|interval|range)|\$\{[^}]+\}|\$[A-Za-z_]\w*")


@dataclass
class PromQL:
    selectors: list[tuple[str, set[str]]] = field(default_factory=list)
    """(metric name, label names its matchers use) per vector selector."""
    grouping: set[str] = field(default_factory=set)
    """Labels named in by/without/on/ignoring/group_* clauses."""

    @property
    def metrics(self) -> set[str]:
        return {name for name, _ in self.selectors}


def substitute_grafana_variables(expr: str) -> str:
    """A dashboard expression as Prometheus would get it: durations for the interval variables,
    a match-everything regex for the template variables (always used inside =~ "...")."""

    def replace(match: re.Match[str]) -> str:
        text = match.group(0)
        if text in ("$__rate_interval", "$__interval"):
            return "5m"
        if text == "$__range":
            return "1h"
        return ".*"

    return _GRAFANA_VARIABLE.sub(replace, expr)


def scan_promql(expr: str) -> PromQL:
    """Metric names, matcher labels and grouping labels of a PromQL expression.

    A small scanner rather than a parser: enough to find every vector selector, since metric
    names are the identifiers that are neither keywords, functions (followed by `(`) nor
    inside braces, brackets or strings. promtool checks the syntax itself where installed.
    """
    result = PromQL()
    tokens = [
        (m.lastgroup, m.group(0)) for m in _TOKEN.finditer(substitute_grafana_variables(expr))
    ]
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else (None, "")
        if kind == "ident" and text in _GROUPING and following[0] == "open":
            j = i + 2
            while j < len(tokens) and tokens[j][1] != ")":
                if tokens[j][0] == "ident":
                    result.grouping.add(tokens[j][1])
                j += 1
            i = j + 1
            continue
        if kind == "ident" and text not in _KEYWORDS and following[0] != "open":
            labels: set[str] = set()
            if following[0] == "matchers":
                labels = _matcher_labels(following[1])
                i += 1
            result.selectors.append((text, labels))
        elif kind == "matchers":
            raise ValueError(f"selector without a metric name in {expr!r}: {text}")
        i += 1
    return result


def _matcher_labels(block: str) -> set[str]:
    inner = block[1:-1]
    labels: set[str] = set()
    pos = 0
    while pos < len(inner.strip()):
        match = _MATCHER.match(inner, pos)
        if match is None:
            raise ValueError(f"cannot read label matchers {block!r}")
        labels.add(match.group(1))
        pos = match.end()
    return labels


def check_promql(expr: str, *, extra_metrics: frozenset[str] = frozenset()) -> PromQL:
    """Fails when the expression uses a metric or label the services do not export."""
    scanned = scan_promql(expr)
    assert scanned.selectors, f"no metric in {expr!r}"
    known = {**ALLOWED_METRICS, **{name: TARGET_LABELS for name in extra_metrics}}
    used_labels: set[str] = set(TARGET_LABELS)
    for name, labels in scanned.selectors:
        assert name in known, f"{expr!r} uses {name!r}, which no Rubricate service exports"
        unknown = labels - known[name] - TARGET_LABELS
        assert not unknown, f"{expr!r}: {name} has no labels {sorted(unknown)}"
        used_labels |= known[name]
    unknown_grouping = scanned.grouping - used_labels
    assert not unknown_grouping, f"{expr!r} groups by unknown labels {sorted(unknown_grouping)}"
    return scanned


# ---------------------------------------------------------------------------------- Dockerfile
@dataclass
class Instruction:
    keyword: str
    value: str
    line: int


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def read_dockerfile(path: Path) -> tuple[list[str], dict[str, str], list[Stage]]:
    """(first lines of comments, global ARG defaults, stages) of a Dockerfile."""
    comments: list[str] = []
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    pending = ""
    start = 0
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            if not stages and stripped.startswith("#"):
                comments.append(stripped)
            continue
        if pending and stripped.startswith("#"):
            continue  # comment lines inside a continued instruction
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = pending + stripped
        pending = ""
        keyword, _, value = text.partition(" ")
        keyword = keyword.upper()
        value = value.strip()
        if keyword == "FROM":
            parts = value.split()
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base=parts[0], name=name))
        elif not stages:
            if keyword == "ARG":
                arg_name, _, default = value.partition("=")
                global_args[arg_name] = default.strip('"')
        else:
            stages[-1].instructions.append(Instruction(keyword, value, start))
    return comments, global_args, stages


# ------------------------------------------------------------------------------- .dockerignore
def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves `path` (relative to the context) out: the last matching pattern
    wins, `!` re-includes, a pattern matching a directory excludes what is under it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw[1:] if negate else raw
        pattern = pattern.strip("/")
        variants = [pattern]
        if pattern.startswith("**/"):
            variants.append(pattern[3:])
        if any(fnmatch.fnmatchcase(p, v) for p in prefixes for v in variants):
            excluded = not negate
    return excluded


# ---------------------------------------------------------------------------------- HTTP server
class _Handler(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        body = b'{"status": "ok"}'
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def http_server(status: int) -> Iterator[int]:
    """A loopback HTTP server answering every GET with `status`; yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.status = status  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
