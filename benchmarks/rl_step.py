"""One RL step at scale: the production shape, every trainer's arrival pattern. Prints figures.

Starts, as separate processes: its own Redis (a private `redis-server` on a free port, so its
commands can be counted), a fresh PostgreSQL database on 127.0.0.1:5432 (trust auth; dropped
afterwards), the judge simulator (`benchmarks/judge_sim.py`: a vLLM fleet with continuous
batching and per-token cost, deterministic answers), and `rubricate serve` store, verifier,
rubric-generator and gateway (the backend `openai` pointed at the simulator, API keys, the
rendezvous in Redis, the audit off unless `--miner`, which adds the miner and one Celery
worker, or a configuration of `--configs` says otherwise), plus a second gateway and a round-robin
TCP balancer (`benchmarks/rl_balancer.py`) for the `replicas` pattern. Then sends steps of
`--sizes` rollouts (prompts x `--group-size` samples of Plan/Research/Review/Answer
trajectories; `/get_reward` labels carry `question`, `group_size` and `step`) in each of
`--patterns`, each run as a fresh tenant (an empty rubric buffer):

- `openrlhf`: one request per sample, all in flight at once, OpenRLHF's remote reward client
  (a 180 s timeout, 5 tries 1 s apart on any error or non-2xx; a scoped token as Basic
  credentials, as its URL mode carries it; no Idempotency-Key);
- `verl`: one request per sample, posted as the rollouts finish (uniformly spread over
  `--verl-window` seconds), the SDK's label (`group_key` = the prompt's uid), Idempotency-Key
  and the trainer adapters' retry policy (`rubricate_client.retry.TRAINER_RETRY`: 3 retries
  at least, and any retryable failure retried for 300 s from the first attempt, Retry-After
  honoured; `SDK_RETRY_FOR_S` = 0 gives the policy before issue 33's fix, 3 retries only);
- `trl`: `--trl-ranks` requests, each rank's contiguous slice of the step, at once;
- `group`: one request per group (its 16 samples), all at once;
- `replicas`: as `openrlhf`, through the balancer in front of two gateway replicas, so every
  group is split across both.

Per run it prints the wall time; the judge-bound floor (the simulator's own time for the same
work: the larger of the work's slot-seconds over the fleet's slots and the critical path, one
rubric generation then one scoring call, after the last arrival for `verl`); errors by final
status; partial groups (`rubricate/partial_group`); whether every reward equals what the
same group gets in one request (the reference: the `group` run's groups that were answered
whole, the others sent again one request each, `--ref-concurrency` at a time, in a tenant of
their own; the simulator's rubrics depend on the group's trajectories, so a partial group's
rewards differ); judge utilisation (slot-seconds over slots x wall); CPU milliseconds per
rollout of every process (from /proc; postgres: the backends of the benchmark's database);
Redis commands per sample (INFO commandstats, the benchmark's own INFO calls excluded); the
gateway's event-loop lag p99 (`rubricate_event_loop_lag_seconds` from `/metrics`); and peak
RSS per process (VmHWM, reset before each run).

After the answers a run waits until its background work settled (the judge idle for
`--settle-s` and, with the audit, none of the run's audits pending) and prints the CPU per
rollout again with that work counted ("with background work"): the audit re-scores groups
after the trainer has its answers, so only this figure holds all of a step's cost.

`--configs lean,deployed` starts one platform per configuration (`CONFIGS`: `lean`, the
benchmark's own: no audit, no gRPC; `deployed`, what a deployment runs: the audit on with
its miner and a prefork worker of concurrency 2 as the Helm chart runs it, gRPC on, JSON
logs; `audit`, `grpc`, `text-logs`: one setting at a time), all up at once, and runs each
size and pattern on each in turn (the order alternating), then prints a table of their CPU
per rollout side by side. `NAME@DIR` runs a configuration with the services of another
checkout (before and after a change, in the same run). `--idle-s S` first measures each
platform's CPU while nothing is sent. `--profile DIR` samples every platform process with
py-spy (`benchmarks/profile_summary.py` reads the stacks).

    python benchmarks/rl_step.py --sizes 256 --patterns group,openrlhf        # quick
    python benchmarks/rl_step.py --sizes 256,1024,4096 --fleet 4              # full matrix
        [--env RUBRICATE_GATEWAY_MAX_IN_FLIGHT_PER_TENANT=100000 ...] [--json out.json]
    python benchmarks/rl_step.py --sizes 1024 --patterns openrlhf,trl --configs lean,deployed
"""

import argparse
import asyncio
import base64
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from rl_client import LeanClient
from rubricate_client.retry import TRAINER_RETRY

SDK_RETRY_FOR_S = TRAINER_RETRY.retry_for_s
"""How long `sdk_post` retries a retryable failure from its first attempt, beyond its 3
retries (the trainer adapters' policy; 0: 3 retries only, the SDK before issue 33's fix)."""

HERE = Path(__file__).resolve().parent
PATTERNS = ("group", "openrlhf", "verl", "trl", "replicas")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PLATFORM = ("gateway", "gateway-2", "store", "verifier", "rubric-generator", "miner", "worker")
"""The Rubricate processes (platform CPU); the others are Redis, PostgreSQL, the simulator,
the balancer and the benchmark's own client."""


@dataclass(frozen=True)
class Config:
    """A platform configuration the benchmark starts (`--configs`): whether the audit runs
    (the miner and a Celery worker, `RUBRICATE_AUDIT_ENABLED`), the settings it adds for every
    service, and the audit worker's pool and concurrency."""

    name: str
    miner: bool = False
    env: tuple[tuple[str, str], ...] = ()
    worker_pool: str = "threads"
    worker_concurrency: int = 4
    source: str | None = None
    """The services from this checkout (`NAME@DIR` in `--configs`; default `--source`)."""


def parse_config(spec: str) -> Config:
    """`NAME` or `NAME@DIR` (the configuration with the services of the checkout in DIR, e.g.
    a worktree of the code before a change, beside the current code in the same run)."""
    name, _, source = spec.partition("@")
    if name not in CONFIGS:
        raise ValueError(f"unknown configuration {name!r} (of {', '.join(CONFIGS)})")
    if not source:
        return CONFIGS[name]
    where = str(Path(source).resolve())
    return replace(CONFIGS[name], name=f"{name}@{Path(where).name}", source=where)


CONFIGS = {
    "lean": Config("lean"),
    # what a deployment runs (docker-compose.yml, the Helm chart): the audit on with its miner
    # and a prefork worker of concurrency 2 (the chart's), gRPC on, JSON logs (the services'
    # default, named here so that no environment changes it); API keys are on in every
    # configuration
    "deployed": Config(
        "deployed",
        miner=True,
        env=(("RUBRICATE_LOG_FORMAT", "json"), ("RUBRICATE_GATEWAY_GRPC_ENABLED", "true")),
        worker_pool="prefork",
        worker_concurrency=2,
    ),
    # one setting of `deployed` at a time, for what each costs
    "audit": Config("audit", miner=True, worker_pool="prefork", worker_concurrency=2),
    "grpc": Config("grpc", env=(("RUBRICATE_GATEWAY_GRPC_ENABLED", "true"),)),
    "text-logs": Config("text-logs", env=(("RUBRICATE_LOG_FORMAT", "text"),)),
}
"""`--configs NAME,...`: the platforms compared side by side in one run."""


def given_config(args: argparse.Namespace) -> Config:
    """The one configuration without `--configs`: `--miner` (a thread-pool worker) and the
    `--env` settings."""
    return Config("as given", miner=bool(args.miner))


_VOCABULARY = (
    "orbit telemetry navigation thruster metric imperial units contractor review board "
    "software trajectory insertion periapsis altitude atmosphere loss mission report "
    "timeline evidence source archive analysis failure cause ground team model"
)
WORDS = tuple(_VOCABULARY.split())


# ---------------------------------------------------------------------------------- the step


@dataclass(frozen=True)
class Sample:
    group: int
    index: int
    question: str
    prompt: str
    response: str


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _sentences(rng: random.Random, n: int) -> str:
    """About `n` words as sentences ("The a is b of the c d."): an answer that asserts
    something, so the judges read it as units and score it (a bare run of words is no
    sentence: the answer's reading would give it the floor without a judge call)."""
    out = []
    for _ in range(max(1, n // 6)):
        a, b, c, d = (rng.choice(WORDS) for _ in range(4))
        out.append(f"The {a} is {b} of the {c} {d}.")
    return " ".join(out)


def make_step(n_rollouts: int, group_size: int, chars: int) -> list[Sample]:
    """The same step every time for a given size: prompts x group_size samples."""
    if n_rollouts % group_size:
        raise SystemExit(f"--sizes: {n_rollouts} is not a multiple of --group-size {group_size}")
    per_stage = max(8, chars // 4 // 7)  # words per stage, ~7 characters a word
    samples = []
    for g in range(n_rollouts // group_size):
        question = f"RL step question {g}: why did mission {g} lose its orbiter?"
        prompt = f"<|user|>{question}<|assistant|>"
        for i in range(group_size):
            rng = random.Random(f"{g}/{i}")
            response = (
                f"<think>scope {_words(rng, per_stage // 4)}</think>"
                f"<structured_plan>{_words(rng, per_stage)}</structured_plan>\n"
                f'<call_tool name="search">{_words(rng, 6)}</call_tool>'
                f"<tool_output>{_words(rng, per_stage)}</tool_output>\n"
                f"<think>audit {_words(rng, per_stage // 4)}</think>"
                f"<review>{_words(rng, per_stage // 2)}</review>\n"
                f"<answer>{_sentences(rng, per_stage)}</answer>"
            )
            samples.append(Sample(g, i, question, prompt, response))
    return samples


def label(sample: Sample, *, group_size: int, step: int, group_key: str | None = None) -> str:
    out: dict[str, Any] = {"question": sample.question, "group_size": group_size, "step": step}
    if group_key is not None:
        out["group_key"] = group_key
    return json.dumps(out)


# ------------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, utime + stime in ticks) of a live process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[11]) + int(fields[12])


def _tree(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                parents.setdefault(stat[0], []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def _hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    url: str | None = None
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def restart(self) -> None:
        """Start the process again, as it was started (it must have exited)."""
        handle = self.log.open("ab")
        self.popen = subprocess.Popen(
            self.argv,
            env=self.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        handle.close()

    def cpu_s(self) -> float:
        ticks = 0
        for pid in _tree(self.popen.pid):
            stat = _stat(pid)
            ticks += stat[1] if stat else 0
        return ticks / CLK_TCK

    def reset_peak(self) -> None:
        for pid in _tree(self.popen.pid):
            with contextlib.suppress(OSError):
                Path(f"/proc/{pid}/clear_refs").write_text("5")

    def peak_mib(self) -> float:
        return sum(_hwm_kib(pid) for pid in _tree(self.popen.pid)) / 1024

    def alive(self) -> bool:
        return self.popen.poll() is None


def start(name: str, argv: list[str], env: dict[str, str], logs: Path, url: str | None) -> Proc:
    log = logs / f"{name}.log"
    handle = log.open("wb")
    popen = subprocess.Popen(
        argv, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )
    handle.close()
    return Proc(name, popen, log, url, argv, env)


def stop(proc: Proc) -> None:
    if not proc.alive():
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.popen.pid, signal.SIGTERM)
    try:
        proc.popen.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait(5)


async def wait_ready(client: httpx.AsyncClient, proc: Proc, path: str, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    last = ""
    while time.monotonic() < deadline:
        if not proc.alive():
            tail = proc.log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"{proc.name} exited at start-up; its log ends:\n{tail}")
        try:
            r = await client.get(f"{proc.url}{path}", timeout=5)
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code} {r.text[:200]}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        await asyncio.sleep(0.5)
    raise SystemExit(f"{proc.name} not ready after {limit_s:.0f} s ({last}); log: {proc.log}")


class Redis:
    """A tiny RESP client for INFO (no dependency on the services' client)."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def info(self, section: str) -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            writer.write(f"*2\r\n$4\r\nINFO\r\n${len(section)}\r\n{section}\r\n".encode())
            await writer.drain()
            header = await reader.readline()
            size = int(header[1:].strip())
            body = await reader.readexactly(size + 2)
            return body[:-2].decode()
        finally:
            writer.close()

    async def commands(self) -> int:
        """Commands served so far, the INFO calls excluded."""
        total = 0
        for line in (await self.info("commandstats")).splitlines():
            m = re.match(r"cmdstat_([^:]+):calls=(\d+)", line)
            if m and m.group(1) != "info":
                total += int(m.group(2))
        return total


@dataclass
class Platform:
    procs: dict[str, Proc]
    redis: Redis
    database: str
    keys: dict[str, str]
    """tenant → API key."""
    sim_url: str
    gateway_url: str
    balancer_url: str | None
    fleet: int
    max_batch: int
    config: Config = field(default_factory=lambda: CONFIGS["lean"])
    miner_url: str | None = None
    """The miner, when the audit runs (its pending audits are waited for after a run)."""
    internal_token: str = ""

    def gateways(self) -> list[Proc]:
        return [p for n, p in self.procs.items() if n.startswith("gateway")]


PG_PORT = 5432
"""The PostgreSQL server the benchmark's database lives on: the machine's (5432), or the
benchmark's own (`--private-postgres`, `start_postgres`), which a fault may restart."""


def _pg_connect(dbname: str) -> Any:
    import psycopg

    return psycopg.connect(
        host="127.0.0.1", port=PG_PORT, user="postgres", dbname=dbname, autocommit=True
    )


def start_postgres(data: Path, logs: Path, env: dict[str, str]) -> Proc:
    """A PostgreSQL cluster of the benchmark's own on a free port (initdb in `data`, a new
    directory whose parents the `postgres` user can traverse;
    trust auth on 127.0.0.1), so that a fault can SIGKILL and restart it without touching
    the machine's server. As root it runs as the `postgres` user (the server refuses root);
    setpriv execs it, so the postmaster is the process a fault signals. Sets `PG_PORT`."""
    global PG_PORT
    found = shutil.which("postgres")
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: p.parts)
    if found is None and not versions:
        raise SystemExit("no PostgreSQL server binary (postgres) for the private cluster")
    bindir = Path(found).parent if found else versions[-1].parent
    data.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(data, user="postgres")
        as_user = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
    initdb = subprocess.run(
        [*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
        capture_output=True,
        text=True,
    )
    if initdb.returncode != 0:
        raise SystemExit(f"initdb failed for the private PostgreSQL:\n{initdb.stderr}")
    port = free_port()
    argv = [*as_user, str(bindir / "postgres"), "-D", str(data), "-p", str(port)]
    argv += ["-k", str(data), "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300"]
    proc = start("postgres", argv, env, logs, None)
    deadline = time.monotonic() + 60
    while True:
        ready = subprocess.run(
            ["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres"], check=False
        )
        if ready.returncode == 0:
            break
        if time.monotonic() > deadline or not proc.alive():
            raise SystemExit(f"the benchmark's PostgreSQL did not start: {logs / 'postgres.log'}")
        time.sleep(0.2)
    PG_PORT = port
    return proc


def create_database() -> str:
    name = f"rl_step_{uuid.uuid4().hex[:10]}"
    with _pg_connect("postgres") as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    with _pg_connect("postgres") as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def postgres_cpu_s(name: str) -> dict[int, float]:
    """CPU seconds of each backend connected to the benchmark's database."""
    with _pg_connect("postgres") as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,)
        ).fetchall()
    out = {}
    for (pid,) in rows:
        stat = _stat(int(pid))
        if stat:
            out[int(pid)] = stat[1] / CLK_TCK
    return out


@contextlib.asynccontextmanager
async def platform(
    args: argparse.Namespace, tenants: list[str], config: Config | None = None
) -> AsyncIterator[Platform]:
    """The platform in `config` (default: `--miner` and `--env` as given)."""
    from rubricate.common.auth import hash_key, new_key

    config = config or given_config(args)
    work = Path(tempfile.mkdtemp(prefix=f"rl-step-{config.name.replace(' ', '-')}-"))
    logs = work / "logs"
    logs.mkdir()
    procs: dict[str, Proc] = {}
    global PG_PORT
    PG_PORT = 5432
    if getattr(args, "private_postgres", False):
        os.chmod(work, 0o711)  # mkdtemp's 0700: the postgres user must reach work/pg
        procs["postgres"] = start_postgres(work / "pg", logs, dict(os.environ))
    database = create_database()
    keys = {tenant: new_key() for tenant in tenants}
    ports = {
        name: free_port()
        for name in ("redis", "sim", "gateway", "gateway-2", "store", "verifier", "generator")
    }
    ports |= {"miner": free_port(), "balancer": free_port()}
    # gRPC listeners of their own (off unless a configuration turns them on): platforms side
    # by side, and two gateway replicas, would all take the default 50051
    grpc_ports = {"gateway": free_port(), "gateway-2": free_port()}
    url = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    redis_url = f"redis://127.0.0.1:{ports['redis']}/0"
    internal_token = uuid.uuid4().hex + uuid.uuid4().hex
    env = {
        **os.environ,
        "RUBRICATE_AUTH_MODE": "api_key",
        "RUBRICATE_AUTH_API_KEYS": ",".join(f"{t}:{hash_key(k)}" for t, k in keys.items()),
        "RUBRICATE_AUTH_INTERNAL_TOKEN": internal_token,
        "RUBRICATE_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{PG_PORT}/{database}",
        "RUBRICATE_DATA_DIR": str(work / "data"),
        "RUBRICATE_MINER_DATA_DIR": str(work / "miner"),
        "RUBRICATE_REDIS_URL": redis_url,
        "RUBRICATE_LLM_BACKEND": "openai",
        "RUBRICATE_LLM_BASE_URL": f"{url['sim']}/v1",
        "RUBRICATE_LLM_MODEL": "judge-sim",
        "RUBRICATE_LLM_CACHE": "off",  # every run pays its judge work (the same prompts recur)
        "RUBRICATE_GATEWAY_RUBRIC_GENERATOR_URL": url["generator"],
        "RUBRICATE_GATEWAY_VERIFIER_URL": url["verifier"],
        "RUBRICATE_GATEWAY_STORE_URL": url["store"],
        "RUBRICATE_GATEWAY_MINER_URL": url["miner"],
        "RUBRICATE_MINER_RUBRIC_GENERATOR_URL": url["generator"],
        "RUBRICATE_MINER_VERIFIER_URL": url["verifier"],
        "RUBRICATE_GATEWAY_REDIS_URL": redis_url,
        "RUBRICATE_GATEWAY_GRPC_ENABLED": "false",
        "RUBRICATE_GATEWAY_GRPC_PORT": str(grpc_ports["gateway"]),
        "RUBRICATE_AUDIT_ENABLED": "true" if config.miner else "false",
        **dict(config.env),
    }
    if config.source or args.source:
        source = Path(config.source or args.source)  # made absolute by parse_args
        paths = [str(source / "services"), str(source / "clients" / "python")]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(":")
    user_env: dict[str, str] = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--env {item!r}: expected NAME=VALUE")
        user_env[name] = value
    env.update(user_env)
    python = sys.executable
    rubricate = str(Path(python).with_name("rubricate"))
    try:
        procs["redis"] = start(
            "redis",
            [
                "redis-server",
                "--port",
                str(ports["redis"]),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if getattr(args, "redis_aof", False) else "no",
                "--dir",
                str(work),
                "--maxclients",
                "20000",
            ],
            env,
            logs,
            None,
        )
        sim = [python, str(HERE / "judge_sim.py"), "--port", str(ports["sim"])]
        sim += ["--fleet", str(args.fleet), "--max-batch", str(args.max_batch)]
        sim += ["--call-s", str(args.call_s), "--prefill-ms", str(args.prefill_ms)]
        sim += ["--decode-ms", str(args.decode_ms)]
        if args.sim_max_queue is not None:
            sim += ["--max-queue", str(args.sim_max_queue)]
        procs["sim"] = start("sim", sim, env, logs, url["sim"])
        services = [
            ("store", "store", ports["store"]),
            ("verifier", "verifier", ports["verifier"]),
            ("rubric-generator", "rubric-generator", ports["generator"]),
            ("gateway", "gateway", ports["gateway"]),
        ]
        if "replicas" in args.patterns:
            services.append(("gateway-2", "gateway", ports["gateway-2"]))
        if config.miner:
            services.append(("miner", "miner", ports["miner"]))
        for name, service, port in services:
            own = env
            if name == "gateway-2" and "RUBRICATE_GATEWAY_GRPC_PORT" not in user_env:
                own = {**env, "RUBRICATE_GATEWAY_GRPC_PORT": str(grpc_ports["gateway-2"])}
            procs[name] = start(
                name,
                [rubricate, "serve", service, "--port", str(port)],
                own,
                logs,
                f"http://127.0.0.1:{port}",
            )
        if config.miner:  # the audit's Celery worker (its CPU: the process and its children)
            worker_env = {
                **env,
                "RUBRICATE_WORKER_METRICS_PORT": "0",
                "RUBRICATE_MINER_QDRANT_PATH": str(work / "worker-qdrant"),
            }
            if config.worker_pool == "prefork":  # as the chart runs it
                worker_env["PROMETHEUS_MULTIPROC_DIR"] = str(work / "worker-prometheus")
            argv = [rubricate, "worker", "--pool", config.worker_pool]
            argv += ["--concurrency", str(config.worker_concurrency)]
            procs["worker"] = start("worker", argv, worker_env, logs, None)
        balancer_url = None
        if "replicas" in args.patterns:
            upstreams = f"127.0.0.1:{ports['gateway']},127.0.0.1:{ports['gateway-2']}"
            procs["balancer"] = start(
                "balancer",
                [
                    python,
                    str(HERE / "rl_balancer.py"),
                    "--port",
                    str(ports["balancer"]),
                    "--upstream",
                    upstreams,
                ],
                env,
                logs,
                url["balancer"],
            )
            balancer_url = url["balancer"]
        async with httpx.AsyncClient() as client:
            await wait_ready(client, procs["sim"], "/health", 60)
            for name, _, _ in services:
                if not name.startswith("gateway"):
                    await wait_ready(client, procs[name], "/healthz", args.start_timeout)
            for proc in (p for n, p in procs.items() if n.startswith("gateway")):
                await wait_ready(client, proc, "/readyz", args.start_timeout)
        yield Platform(
            procs=procs,
            redis=Redis(ports["redis"]),
            database=database,
            keys=keys,
            sim_url=url["sim"],
            gateway_url=url["gateway"],
            balancer_url=balancer_url,
            fleet=args.fleet,
            max_batch=args.max_batch,
            config=config,
            miner_url=url["miner"] if config.miner else None,
            internal_token=internal_token,
        )
    finally:
        for proc in reversed(list(procs.values())):
            stop(proc)
        with contextlib.suppress(Exception):
            drop_database(database)
        if args.keep_logs:
            print(f"logs kept in {logs}")
        else:
            shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- the patterns


@dataclass
class Outcome:
    status: str = "not sent"
    """`200`, another HTTP status, or the exception's name, of the last attempt."""
    reward: float | None = None
    partial: bool = False
    scored_size: int = 0


@dataclass
class Tally:
    outcomes: dict[tuple[int, int], Outcome] = field(default_factory=dict)
    attempts: Counter[str] = field(default_factory=Counter)
    """Every attempt's status."""
    last_post_s: float = 0.0


def _record(tally: Tally, samples: list[Sample], status: str, body: Any) -> None:
    for i, sample in enumerate(samples):
        out = tally.outcomes[(sample.group, sample.index)]
        out.status = status
        if status == "200" and isinstance(body, dict):
            logs = body.get("extra_logs", {})
            out.reward = body["rewards"][i]
            out.partial = bool(logs.get("rubricate/partial_group", [0.0] * len(samples))[i])
            out.scored_size = int(logs.get("rubricate/group_size", [0.0] * len(samples))[i])


class Poster:
    """Posts the trainer's requests: the lean client (default; about 0.3 ms of CPU a request)
    or httpx (`--client httpx`, ~10 ms a request: the figures before the lean client)."""

    def __init__(self, kind: str, base_url: str) -> None:
        self.kind = kind
        self.base_url = base_url
        self._lean = LeanClient(base_url) if kind == "lean" else None
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        self._httpx = httpx.AsyncClient(limits=limits) if kind == "httpx" else None

    async def aclose(self) -> None:
        if self._lean is not None:
            await self._lean.aclose()
        if self._httpx is not None:
            await self._httpx.aclose()

    async def post(
        self, path: str, body: dict[str, Any], headers: dict[str, str], limit_s: float
    ) -> tuple[str, Any, float | None]:
        try:
            if self._lean is not None:
                lean = await self._lean.post(path, body, headers, limit_s=limit_s)
                status, got, content = lean.status, lean.headers, lean.body
            else:
                assert self._httpx is not None
                r = await self._httpx.post(
                    self.base_url + path, json=body, headers=headers, timeout=limit_s
                )
                status, got, content = r.status_code, dict(r.headers), r.content
        except (httpx.HTTPError, OSError, TimeoutError, ValueError) as exc:
            return type(exc).__name__, None, None
        retry_after = got.get("retry-after")
        try:
            data = json.loads(content)
        except ValueError:
            data = None
        return str(status), data, float(retry_after) if retry_after else None


def _body(samples: list[Sample], labels: list[str], *, with_prompt: bool) -> dict[str, Any]:
    if with_prompt:
        return {
            "query": [s.prompt + s.response for s in samples],
            "prompts": [s.prompt for s in samples],
            "labels": labels,
        }
    return {"query": [s.response for s in samples], "labels": labels}


async def openrlhf_post(
    client: Poster,
    url: str,
    sample: Sample,
    token: str,
    step: int,
    gsize: int,
    tally: Tally,
) -> None:
    """OpenRLHF's remote reward client: a plain JSON POST, 180 s timeout, 5 tries 1 s apart."""
    body = _body([sample], [label(sample, group_size=gsize, step=step)], with_prompt=True)
    basic = base64.b64encode(f"rubricate:{token}".encode()).decode()
    headers = {"Authorization": f"Basic {basic}"}
    for attempt in range(5):
        status, data, _ = await client.post(url, body, headers, 180.0)
        tally.attempts[status] += 1
        if status == "200":
            _record(tally, [sample], status, data)
            return
        _record(tally, [sample], status, None)
        if attempt < 4:
            await asyncio.sleep(1.0)


async def sdk_post(
    client: Poster,
    url: str,
    samples: list[Sample],
    labels: list[str],
    key: str,
    tally: Tally,
    *,
    with_prompt: bool,
) -> None:
    """The trainer adapters' policy (`TRAINER_RETRY`): an Idempotency-Key kept across tries,
    429/5xx/transport errors retried 3 times and then on until `SDK_RETRY_FOR_S` after the
    first attempt, Retry-After honoured (else 0.5 s x 2^n with jitter, at most 5 s), 900 s
    timeout."""
    body = _body(samples, labels, with_prompt=with_prompt)
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": uuid.uuid4().hex}
    began, attempt = time.monotonic(), 0
    while True:
        status, data, retry_after = await client.post(url, body, headers, 900.0)
        tally.attempts[status] += 1
        _record(tally, samples, status, data if status == "200" else None)
        retryable = not status.isdigit() or status == "429" or status.startswith("5")
        if status == "200" or not retryable:
            return
        backoff = min(TRAINER_RETRY.backoff_max_s, 0.5 * 2**attempt) * random.uniform(0.5, 1)
        delay = min(retry_after, 300.0) if retry_after is not None else backoff
        if attempt >= 3 and time.monotonic() - began + delay >= SDK_RETRY_FOR_S:
            return
        await asyncio.sleep(delay)
        attempt += 1


async def run_pattern(
    pattern: str,
    client: httpx.AsyncClient,
    plat: Platform,
    tenant: str,
    samples: list[Sample],
    args: argparse.Namespace,
    tally: Tally,
) -> None:
    poster = Poster(args.client, plat.gateway_url)
    try:
        await _send_pattern(pattern, client, poster, plat, plat.keys[tenant], samples, args, tally)
    finally:
        await poster.aclose()


async def _send_pattern(
    pattern: str,
    client: httpx.AsyncClient,
    poster: Poster,
    plat: Platform,
    key: str,
    samples: list[Sample],
    args: argparse.Namespace,
    tally: Tally,
) -> None:
    gsize, step = args.group_size, 0
    url = "/get_reward"
    started = time.monotonic()
    if pattern in ("openrlhf", "replicas"):
        r = await client.post(
            f"{plat.gateway_url}/v1/auth/tokens",
            json={"ttl_s": 86400, "paths": ["/get_reward"]},
            headers={"Authorization": f"Bearer {key}"},
        )
        r.raise_for_status()
        token = r.json()["token"]
        if pattern == "replicas":
            assert plat.balancer_url is not None
            await poster.aclose()
            poster = Poster(args.client, plat.balancer_url)
        try:
            await asyncio.gather(
                *(openrlhf_post(poster, url, s, token, step, gsize, tally) for s in samples)
            )
        finally:
            await poster.aclose()
    elif pattern == "verl":
        rng = random.Random(0)
        offsets = sorted((rng.uniform(0, args.verl_window), s) for s in samples)

        async def streamed(at: float, sample: Sample) -> None:
            await asyncio.sleep(max(0.0, started + at - time.monotonic()))
            tally.last_post_s = max(tally.last_post_s, time.monotonic() - started)
            lab = label(sample, group_size=gsize, step=step, group_key=f"uid-{sample.group}")
            await sdk_post(poster, url, [sample], [lab], key, tally, with_prompt=False)

        await asyncio.gather(*(streamed(at, s) for at, s in offsets))
    elif pattern == "trl":
        ranks = args.trl_ranks
        per = -(-len(samples) // ranks)
        slices = [samples[i : i + per] for i in range(0, len(samples), per)]
        await asyncio.gather(
            *(
                sdk_post(
                    poster,
                    url,
                    part,
                    [label(s, group_size=gsize, step=step, group_key=f"p{s.group}") for s in part],
                    key,
                    tally,
                    with_prompt=True,
                )
                for part in slices
            )
        )
    elif pattern == "group":
        groups: dict[int, list[Sample]] = {}
        for s in samples:
            groups.setdefault(s.group, []).append(s)
        await asyncio.gather(
            *(
                sdk_post(
                    poster,
                    url,
                    members,
                    [label(s, group_size=gsize, step=step) for s in members],
                    key,
                    tally,
                    with_prompt=True,
                )
                for members in groups.values()
            )
        )
    else:
        raise SystemExit(f"unknown pattern {pattern!r}")


# --------------------------------------------------------------------------- measurements


def lag_buckets(text: str, service: str = "gateway") -> dict[float, float]:
    out: dict[float, float] = {}
    pattern = re.compile(
        r'^rubricate_event_loop_lag_seconds_bucket\{(?=[^}]*service="'
        + re.escape(service)
        + r'")[^}]*le="([^"]+)"[^}]*\} ([0-9.e+-]+)$',
        re.M,
    )
    for m in pattern.finditer(text):
        out[float(m.group(1))] = float(m.group(2))
    return out


def histogram_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The q-quantile of the observations between two cumulative snapshots (linear within a
    bucket, as PromQL's histogram_quantile); NaN without observations."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return float("nan")
    rank = q * counts[-1]
    lower, below = 0.0, 0.0
    for bound, cum in zip(bounds, counts, strict=True):
        if cum >= rank:
            if bound == float("inf"):
                return lower
            width = cum - below
            return lower + (bound - lower) * ((rank - below) / width if width else 1.0)
        lower, below = bound, cum
    return lower


SENT = re.compile(r"^rubricate_redis_commands_total\{[^}]*\} ([0-9.e+-]+)$", re.M)


@dataclass
class Snapshot:
    at: float
    cpu: dict[str, float]
    pg: dict[int, float]
    redis_commands: int
    redis_sent: float
    """Commands the services sent (`rubricate_redis_commands_total`: a Lua script counts once,
    where INFO commandstats also counts each command the script runs)."""
    lag: dict[str, dict[float, float]]
    client_cpu: float


async def snapshot(plat: Platform, client: httpx.AsyncClient) -> Snapshot:
    lag = {}
    sent = 0.0
    for proc in plat.procs.values():
        if proc.url is None or proc.name in ("sim", "balancer"):
            continue
        try:
            r = await client.get(f"{proc.url}/metrics", timeout=30)
        except httpx.HTTPError:
            continue
        if proc in plat.gateways():
            lag[proc.name] = lag_buckets(r.text, "gateway")
        sent += sum(float(m.group(1)) for m in SENT.finditer(r.text))
    times = os.times()
    return Snapshot(
        at=time.monotonic(),
        cpu={name: proc.cpu_s() for name, proc in plat.procs.items()},
        pg=await asyncio.to_thread(postgres_cpu_s, plat.database),
        redis_commands=await plat.redis.commands(),
        redis_sent=sent,
        lag=lag,
        client_cpu=times.user + times.system,
    )


@dataclass
class RunResult:
    size: int
    pattern: str
    tenant: str
    wall_s: float
    floor_s: float
    work_floor_s: float
    critical_s: float
    ok: int
    errors: dict[str, int]
    attempts: dict[str, int]
    partial_groups: int
    partial_samples: int
    groups: int
    rewards_equal: int | None
    rewards_differ: int | None
    reward_missing: int
    judge_util: float
    judge_busy: float
    judge_requests: dict[str, int]
    judge_rejected: int
    judge_after: int
    """Judge calls after the last answer (background work: the audit)."""
    redis_per_sample: float
    redis_sent_per_sample: float
    lag_p99_ms: dict[str, float]
    cpu_ms_per_rollout: dict[str, float]
    platform_cpu_ms: float
    peak_rss_mib: dict[str, float]
    rewards: dict[str, float | None] = field(default_factory=dict, repr=False)
    clean: dict[str, float] = field(default_factory=dict, repr=False)
    """Rewards of the groups answered whole: every sample scored, none partial."""
    rewards_unchecked: int = 0
    """Answered samples whose group has no clean reference."""
    config: str = "as given"
    settled_s: float = 0.0
    """From the first request until the background work settled (`settle`)."""
    cpu_settled_ms_per_rollout: dict[str, float] = field(default_factory=dict)
    """CPU per rollout of each process until then: the step's cost, its audit included."""
    platform_cpu_settled_ms: float = 0.0
    audited_groups: int = 0
    """Groups the audit's reference judge re-scored (its sample varies from run to run)."""

    def compare(self, reference: dict[str, float]) -> None:
        self.rewards_equal = self.rewards_differ = self.rewards_unchecked = 0
        for k, v in self.rewards.items():
            ref = reference.get(k)
            if ref is None:
                self.rewards_unchecked += 1
            elif v is not None and abs(v - ref) <= 1e-9:
                self.rewards_equal += 1
            else:
                self.rewards_differ += 1


async def audit_statuses(client: httpx.AsyncClient, plat: Platform, tenant: str) -> Counter[str]:
    """The tenant's audited groups by status (`pending`, `done`, `failed`; none without the
    audit), from the miner."""
    if plat.miner_url is None:
        return Counter()
    from rubricate.common.tenancy import TENANT_HEADER

    headers = {"Authorization": f"Bearer {plat.internal_token}", TENANT_HEADER: tenant}
    try:
        r = await client.get(
            f"{plat.miner_url}/v1/audit/groups", params={"limit": 1000}, headers=headers
        )
    except httpx.HTTPError:
        return Counter()
    if r.status_code != 200:
        return Counter()
    return Counter(audit["status"] for audit in r.json()["audits"])


async def settle(
    client: httpx.AsyncClient, plat: Platform, seen: int, quiet_s: float, tenant: str | None = None
) -> int:
    """Wait until the judge has been idle for `quiet_s` and, with the audit, none of
    `tenant`'s audits is pending (background work after the answers finishes before the
    next run, and is counted in the run's settled CPU); the judge calls made meanwhile."""
    if quiet_s <= 0:
        return 0
    requests, quiet_since, deadline = seen, time.monotonic(), time.monotonic() + 300
    while time.monotonic() < deadline:
        stats = (await client.get(f"{plat.sim_url}/sim/stats")).json()
        if stats["requests"] != requests or stats["in_service"]:
            requests, quiet_since = stats["requests"], time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            if tenant is None or not (await audit_statuses(client, plat, tenant))["pending"]:
                break
            quiet_since = time.monotonic()
        await asyncio.sleep(0.25)
    return int(requests - seen)


def start_profilers(
    plat: Platform, run: str, args: argparse.Namespace
) -> list[subprocess.Popen[bytes]]:
    """`--profile DIR`: py-spy (from PyPI) samples each platform process (and its children)
    from the run's start until its background work settled, written as collapsed stacks
    (`DIR/<run>-<process>.txt`, one line per stack and count)."""
    if not getattr(args, "profile", None):
        return []
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out = Path(args.profile)
    out.mkdir(parents=True, exist_ok=True)
    started = []
    for name, proc in plat.procs.items():
        if name not in PLATFORM or not proc.alive():
            continue
        argv = [spy, "record", "--pid", str(proc.popen.pid), "--rate", "100", "--format", "raw"]
        # --gil: only the thread that holds the GIL (where the CPU goes, not threads
        # waiting); --subprocesses: a prefork worker runs its tasks in child processes
        argv += ["--output", str(out / f"{run}-{name}.txt"), "--nonblocking", "--gil"]
        argv += ["--subprocesses"]
        started.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return started


def stop_profilers(profilers: list[subprocess.Popen[bytes]]) -> None:
    for spy in profilers:
        spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
    for spy in profilers:
        try:
            spy.wait(30)
        except subprocess.TimeoutExpired:
            spy.kill()


async def measure(
    pattern: str,
    plat: Platform,
    tenant: str,
    samples: list[Sample],
    args: argparse.Namespace,
) -> RunResult:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=900) as client:
        await client.post(f"{plat.sim_url}/sim/reset")
        for proc in plat.procs.values():
            proc.reset_peak()
        before = await snapshot(plat, client)
        tally = Tally(outcomes={(s.group, s.index): Outcome() for s in samples})
        label = plat.config.name.replace(" ", "-").replace("@", "-at-")
        profilers = start_profilers(plat, f"{len(samples)}-{pattern}-{tenant}-{label}", args)
        started = time.monotonic()
        try:
            await asyncio.wait_for(
                run_pattern(pattern, client, plat, tenant, samples, args, tally),
                timeout=args.run_timeout,
            )
        except TimeoutError:
            for out in tally.outcomes.values():
                if out.status not in ("200",):
                    out.status = f"unanswered after {args.run_timeout:g} s"
        wall = time.monotonic() - started
        after = await snapshot(plat, client)
        sim = (await client.get(f"{plat.sim_url}/sim/stats")).json()
        trailing = await settle(client, plat, sim["requests"], args.settle_s, tenant)
        settled_s = time.monotonic() - started
        stop_profilers(profilers)  # the profiles include the background work (the audit)
        settled = await snapshot(plat, client)
        audited = await audit_statuses(client, plat, tenant)
    n = len(samples)
    kinds = sim["kinds"]
    slots = plat.fleet * plat.max_batch
    work_floor = sim["slot_s"] / slots
    critical = sum(kinds.get(k, {}).get("max_service_s", 0.0) for k in ("generation", "scoring"))
    floor = max(work_floor, tally.last_post_s + critical)
    cpu = {name: (after.cpu[name] - before.cpu.get(name, 0.0)) * 1000 / n for name in after.cpu}
    pg = sum(v - before.pg.get(pid, 0.0) for pid, v in after.pg.items())
    cpu["postgres"] = pg * 1000 / n
    cpu["client"] = (after.client_cpu - before.client_cpu) * 1000 / n
    platform_cpu = sum(v for k, v in cpu.items() if k in PLATFORM)
    cpu_settled = {
        name: (settled.cpu[name] - before.cpu.get(name, 0.0)) * 1000 / n for name in settled.cpu
    }
    errors = Counter(o.status for o in tally.outcomes.values() if o.status != "200")
    partial = {k[0] for k, o in tally.outcomes.items() if o.status == "200" and o.partial}
    partial_samples = sum(1 for o in tally.outcomes.values() if o.status == "200" and o.partial)
    rewards = {f"{g}/{i}": o.reward for (g, i), o in tally.outcomes.items() if o.status == "200"}
    lag = {
        name: histogram_quantile(before.lag[name], after.lag.get(name, {}), 0.99) * 1000
        for name in before.lag
    }
    by_group: dict[int, list[tuple[int, Outcome]]] = {}
    for (g, i), o in tally.outcomes.items():
        by_group.setdefault(g, []).append((i, o))
    clean: dict[str, float] = {}
    for g, members in by_group.items():
        whole = all(
            o.status == "200" and not o.partial and o.scored_size == len(members)
            for _, o in members
        )
        if whole:
            clean |= {f"{g}/{i}": o.reward for i, o in members if o.reward is not None}
    return RunResult(
        clean=clean,
        size=n,
        pattern=pattern,
        tenant=tenant,
        wall_s=wall,
        floor_s=floor,
        work_floor_s=work_floor,
        critical_s=critical,
        ok=sum(1 for o in tally.outcomes.values() if o.status == "200"),
        errors=dict(errors),
        attempts=dict(tally.attempts),
        partial_groups=len(partial),
        partial_samples=partial_samples,
        groups=n // args.group_size,
        rewards_equal=None,
        rewards_differ=None,
        reward_missing=sum(1 for v in rewards.values() if v is None),
        judge_util=sim["slot_s"] / (slots * wall) if wall else 0.0,
        judge_busy=sim["busy_wall_s"] / wall if wall else 0.0,
        judge_requests={k: v["requests"] for k, v in kinds.items()},
        judge_rejected=sim["rejected"],
        judge_after=trailing,
        redis_per_sample=(after.redis_commands - before.redis_commands) / n,
        redis_sent_per_sample=(after.redis_sent - before.redis_sent) / n,
        lag_p99_ms=lag,
        cpu_ms_per_rollout=cpu,
        platform_cpu_ms=platform_cpu,
        peak_rss_mib={name: proc.peak_mib() for name, proc in plat.procs.items()},
        rewards=rewards,
        config=plat.config.name,
        settled_s=settled_s,
        cpu_settled_ms_per_rollout=cpu_settled,
        platform_cpu_settled_ms=sum(v for k, v in cpu_settled.items() if k in PLATFORM),
        audited_groups=audited["done"] + audited["failed"],
    )


def rewards_line(r: RunResult) -> str:
    if r.rewards_equal is None:
        return "rewards vs one request   (after the reference pass)"
    return (
        f"rewards vs one request   {r.rewards_equal:8d} equal, {r.rewards_differ} differ "
        f"(of {r.ok} answered; {r.reward_missing} null; {r.rewards_unchecked} without a "
        "reference)"
    )


def report(r: RunResult) -> None:
    def fmt(values: dict[str, float], unit: str = "") -> str:
        return " · ".join(f"{k} {v:.1f}{unit}" for k, v in values.items() if v >= 0.05)

    print(
        f"\n== {r.size} rollouts ({r.groups} prompts x {r.size // r.groups}), {r.pattern}, "
        f"{r.config} =="
    )
    print(f"wall                     {r.wall_s:8.1f} s")
    print(
        f"judge-bound floor        {r.floor_s:8.1f} s   (work {r.work_floor_s:.1f} s over the "
        f"fleet's slots; critical path {r.critical_s:.1f} s)   "
        f"wall/floor {r.wall_s / r.floor_s:.2f}"
        if r.floor_s
        else "judge-bound floor             n/a"
    )
    print(
        f"answered                 {r.ok:8d} / {r.size}   errors by final status: {r.errors or 0}"
    )
    print(f"attempts by status       {r.attempts}")
    print(
        f"partial groups           {r.partial_groups:8d} / {r.groups}   "
        f"({r.partial_samples} answered samples flagged rubricate/partial_group)"
    )
    print(rewards_line(r))
    print(
        f"judge utilisation        {r.judge_util * 100:8.1f} % of slots x wall   "
        f"(some call in service {r.judge_busy * 100:.0f} % of the wall)"
    )
    print(
        f"judge calls              {r.judge_requests}   429s: {r.judge_rejected}   "
        f"after the last answer: {r.judge_after}"
    )
    print(
        f"Redis commands / sample  {r.redis_per_sample:8.1f}   (served, each step of a script "
        f"counted; sent by the services: {r.redis_sent_per_sample:.1f})"
    )
    print(f"gateway loop lag p99     {fmt(r.lag_p99_ms, ' ms')}")
    print(f"CPU ms / rollout         {fmt(r.cpu_ms_per_rollout)}")
    print(f"platform CPU ms/rollout  {r.platform_cpu_ms:8.1f}   (Rubricate processes together)")
    print(
        f"with background work     {r.platform_cpu_settled_ms:8.1f}   (until settled, "
        f"{r.settled_s:.1f} s after the first request: {fmt(r.cpu_settled_ms_per_rollout)})"
    )
    if r.audited_groups:
        worker = r.cpu_settled_ms_per_rollout.get("worker", 0.0) * r.size
        print(
            f"audited groups           {r.audited_groups:8d}   (the worker's CPU: "
            f"{worker / r.audited_groups:.0f} ms per audited group)"
        )
    print(f"peak RSS MiB             {fmt(r.peak_rss_mib)}")
    sys.stdout.flush()


def table(results: list[RunResult]) -> None:
    print(
        "\n| rollouts | pattern | wall s | floor s | answered | errors (final status) | "
        "partial groups | rewards = one request | judge util | Redis cmd/sample (sent) | "
        "gw lag p99 ms | platform CPU ms/rollout (gateway) | gateway peak RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        errors = ", ".join(f"{v}× {k}" for k, v in sorted(r.errors.items())) or "0"
        equal = "–" if r.rewards_equal is None else f"{r.rewards_equal}/{r.ok}"
        lag = max((v for v in r.lag_p99_ms.values() if v == v), default=float("nan"))
        gw = sum(v for k, v in r.cpu_ms_per_rollout.items() if k.startswith("gateway"))
        rss = max(v for k, v in r.peak_rss_mib.items() if k.startswith("gateway"))
        print(
            f"| {r.size:,} | {r.pattern} | {r.wall_s:.1f} | {r.floor_s:.1f} | {r.ok} | {errors} | "
            f"{r.partial_groups}/{r.groups} | {equal} | {r.judge_util * 100:.0f}% | "
            f"{r.redis_per_sample:.0f} ({r.redis_sent_per_sample:.1f}) | {lag:.0f} | "
            f"{r.platform_cpu_ms:.0f} ({gw:.0f}) | "
            f"{rss:.0f} |"
        )


async def reference_pass(
    plat: Platform,
    tenant: str,
    samples: list[Sample],
    args: argparse.Namespace,
    known: dict[str, float],
) -> dict[str, float]:
    """What each group gets in one request: `known` (the groups the `group` run answered
    whole), and the other groups sent again, one request each, `--ref-concurrency` at a
    time, in a tenant of their own (not timed). A group still not answered whole has no
    reference."""
    missing = sorted({s.group for s in samples if f"{s.group}/{s.index}" not in known})
    if not missing:
        return known
    print(
        f"\n(reference pass: {len(missing)} groups, one request each, "
        f"{args.ref_concurrency} at a time, not timed)",
        flush=True,
    )
    members = [s for s in samples if s.group in set(missing)]
    tally = Tally(outcomes={(s.group, s.index): Outcome() for s in members})
    gate = asyncio.Semaphore(args.ref_concurrency)
    poster = Poster(args.client, plat.gateway_url)

    async def one(group: list[Sample]) -> None:
        async with gate:
            labels = [label(s, group_size=args.group_size, step=0) for s in group]
            await sdk_post(
                poster, "/get_reward", group, labels, plat.keys[tenant], tally, with_prompt=True
            )

    try:
        await asyncio.gather(*(one([s for s in members if s.group == g]) for g in missing))
    finally:
        await poster.aclose()
    out = dict(known)
    for g in missing:
        got = [(i, o) for (gg, i), o in tally.outcomes.items() if gg == g]
        if all(o.status == "200" and not o.partial and o.reward is not None for _, o in got):
            out |= {f"{g}/{i}": float(o.reward) for i, o in got if o.reward is not None}
    if len(out) < len(samples):
        print(f"(reference pass: {len(samples) - len(out)} samples still without a reference)")
    return out


def source_description(source: str | None) -> str:
    where = Path(source or HERE.parent).resolve()
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "log", "-1", "--format=%h %s"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(where)
    return f"{where} at {commit[:90]}{' (+ uncommitted changes)' if dirty else ''}"


async def idle_cpu(plats: list[Platform], seconds: float) -> None:
    """`--idle-s`: each platform's CPU while nothing is sent (its timers and pollers), in ms
    of CPU per second per process, all platforms over the same seconds."""
    before = [{n: p.cpu_s() for n, p in plat.procs.items()} for plat in plats]
    await asyncio.sleep(seconds)
    for plat, cpu in zip(plats, before, strict=True):
        used = {n: (p.cpu_s() - cpu[n]) * 1000 / seconds for n, p in plat.procs.items()}
        platform_ms = sum(v for n, v in used.items() if n in PLATFORM)
        parts = " · ".join(f"{n} {v:.1f}" for n, v in used.items() if n in PLATFORM)
        print(f"idle CPU ms/s ({plat.config.name}, {seconds:g} s): {platform_ms:.1f} ({parts})")


async def settle_reference(plat: Platform, size: int, args: argparse.Namespace) -> None:
    """After a reference pass: its background work (the audit of its groups) done before
    the next run is measured."""
    async with httpx.AsyncClient(timeout=60) as client:
        seen = (await client.get(f"{plat.sim_url}/sim/stats")).json()["requests"]
        await settle(client, plat, seen, args.settle_s, f"rl-{size}-ref")


def compare(results: list[RunResult]) -> None:
    """`--configs`: each configuration's platform CPU per rollout (its background work
    included) beside the first configuration's, per size and pattern."""
    first = results[0].config
    print(
        "\n| rollouts | pattern | configuration | platform CPU ms/rollout | × "
        f"{first} | gateway | verifier | store | generator | miner | audit worker | "
        "at the answers | audited groups | wall s | answered | partial groups | "
        "rewards = one request |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    base: dict[tuple[int, str], float] = {
        (r.size, r.pattern): r.platform_cpu_settled_ms for r in results if r.config == first
    }
    order = {name: i for i, name in enumerate(dict.fromkeys(r.config for r in results))}
    for r in sorted(results, key=lambda r: (r.size, r.pattern, order[r.config])):
        cpu = r.cpu_settled_ms_per_rollout
        parts = [
            f"{cpu[name]:.1f}" if name in cpu else "–"
            for name in ("gateway", "verifier", "store", "rubric-generator", "miner", "worker")
        ]
        ref = base.get((r.size, r.pattern))
        ratio = f"{r.platform_cpu_settled_ms / ref:.2f}" if ref else "–"
        equal = "–" if r.rewards_equal is None else f"{r.rewards_equal}/{r.ok}"
        print(
            f"| {r.size:,} | {r.pattern} | {r.config} | {r.platform_cpu_settled_ms:.1f} | "
            f"{ratio} | {' | '.join(parts)} | {r.platform_cpu_ms:.1f} | "
            f"{r.audited_groups or '–'} | {r.wall_s:.1f} | "
            f"{r.ok}/{r.size} | {r.partial_groups}/{r.groups} | {equal} |"
        )


async def main(args: argparse.Namespace) -> list[RunResult]:
    runs = [(size, p) for size in args.sizes for p in args.patterns]
    tenants = [f"rl-{size}-{p}" for size, p in runs] + [f"rl-{size}-ref" for size in args.sizes]
    configs = [parse_config(c) for c in args.configs] if args.configs else [given_config(args)]
    results: list[RunResult] = []
    async with contextlib.AsyncExitStack() as stack:
        plats: list[Platform] = []
        for config in configs:  # every configuration up at once: their runs alternate
            plat = await stack.enter_async_context(platform(args, tenants, config))
            plats.append(plat)
            where = source_description(config.source or args.source)
            audit = f", miner, worker ({config.worker_pool} x {config.worker_concurrency})"
            print(f"services of {config.name} from {where}")
            print(
                f"platform up ({config.name}): gateway{'s x2' if plat.balancer_url else ''}, "
                f"store, verifier, rubric-generator{audit if config.miner else ''}"
                f"{''.join(f'; {k}={v}' for k, v in config.env)}; judge sim fleet "
                f"{args.fleet} x batch {args.max_batch}; PostgreSQL db {plat.database}; "
                f"Redis :{plat.redis.port}; {os.cpu_count()} CPUs",
                flush=True,
            )
        if args.idle_s > 0:
            await idle_cpu(plats, args.idle_s)
        turn = 0
        for size in args.sizes:
            samples = make_step(size, args.group_size, args.trajectory_chars)
            references: dict[str, dict[str, float]] = {}
            patterns = list(args.patterns)
            if "group" in patterns:  # the reference's source goes first
                patterns.remove("group")
                patterns.insert(0, "group")
            elif args.check_rewards:
                for plat in plats:
                    references[plat.config.name] = await reference_pass(
                        plat, f"rl-{size}-ref", samples, args, {}
                    )
                    await settle_reference(plat, size, args)
            for pattern in patterns:
                # the configurations take turns going first (A B, B A, ...): neither always
                # runs after the other
                order = plats if turn % 2 == 0 else plats[::-1]
                turn += 1
                for plat in order:
                    result = await measure(pattern, plat, f"rl-{size}-{pattern}", samples, args)
                    reference = references.get(plat.config.name)
                    if reference is not None:
                        result.compare(reference)
                    report(result)
                    if pattern == "group" and args.check_rewards:
                        references[plat.config.name] = await reference_pass(
                            plat, f"rl-{size}-ref", samples, args, result.clean
                        )
                        result.compare(references[plat.config.name])
                        print(rewards_line(result), flush=True)
                        await settle_reference(plat, size, args)
                    results.append(result)
                    dead = [p.name for p in plat.procs.values() if not p.alive()]
                    if dead:
                        raise SystemExit(f"processes died during the run: {dead}")
                    await asyncio.sleep(args.pause)
        table(results)
        if len(configs) > 1:
            compare(results)
    if args.json:
        Path(args.json).write_text(  # noqa: ASYNC240 - once, after the runs
            json.dumps(
                [{k: v for k, v in vars(r).items() if k != "rewards"} for r in results], indent=1
            )
        )
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ints = lambda v: [int(x.replace("_", "").replace(",", "")) for x in v.split(",")]  # noqa: E731
    parser.add_argument(
        "--sizes", type=ints, default=[256], help="rollouts per step, e.g. 256,1024"
    )
    parser.add_argument(
        "--patterns",
        type=lambda v: v.split(","),
        default=["group", "openrlhf"],
        help=f"comma-separated, of {','.join(PATTERNS)}",
    )
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--trajectory-chars", type=int, default=3000)
    parser.add_argument("--verl-window", type=float, default=10.0, help="s over which veRL posts")
    parser.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="the load generator's HTTP client for /get_reward: lean (a fraction of a ms of "
        "CPU a request, benchmarks/rl_client.py) or httpx (~10 ms a request)",
    )
    parser.add_argument("--trl-ranks", type=int, default=8)
    parser.add_argument("--fleet", type=int, default=1, help="simulated judge servers")
    parser.add_argument("--max-batch", type=int, default=256, help="per server (max_num_seqs)")
    parser.add_argument("--call-s", type=float, default=0.02)
    parser.add_argument("--prefill-ms", type=float, default=0.05)
    parser.add_argument("--decode-ms", type=float, default=5.0)
    parser.add_argument("--sim-max-queue", type=int, default=None, help="429 beyond this queue")
    parser.add_argument(
        "--miner", action="store_true", help="start the miner and a worker, the audit on"
    )
    parser.add_argument(
        "--configs",
        type=lambda v: v.split(","),
        default=None,
        help=f"side by side in one run, of {','.join(CONFIGS)}, each optionally NAME@DIR (the "
        "services from the checkout in DIR): each configuration's platform is started and "
        "their runs alternate; a table compares their CPU per rollout (default: one "
        "platform, --miner as given)",
    )
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for every service")
    parser.add_argument("--run-timeout", type=float, default=1200.0)
    parser.add_argument("--start-timeout", type=float, default=180.0)
    parser.add_argument("--pause", type=float, default=1.0, help="s between runs")
    parser.add_argument(
        "--settle-s",
        type=float,
        default=None,
        help="after a run, wait until the judge has been idle this long and, with the audit, "
        "no audit of the run is pending (default 2 s; 0: do not wait)",
    )
    parser.add_argument(
        "--no-check-rewards",
        dest="check_rewards",
        action="store_false",
        help="without the group pattern, skip the reference pass",
    )
    parser.add_argument(
        "--source",
        default=None,
        help="run the services from this checkout (its services/ and clients/python/ first on "
        "PYTHONPATH), e.g. a git worktree of the code before a change",
    )
    parser.add_argument(
        "--ref-concurrency", type=int, default=4, help="groups in flight in the reference pass"
    )
    parser.add_argument("--keep-logs", action="store_true")
    parser.add_argument(
        "--profile", default=None, help="DIR: py-spy each platform process during each run"
    )
    parser.add_argument(
        "--idle-s",
        type=float,
        default=0.0,
        help="before the runs, measure each platform's CPU while idle for this long",
    )
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    if args.settle_s is None:
        args.settle_s = 2.0
    if args.source:
        args.source = str(Path(args.source).resolve())
    unknown = set(args.patterns) - set(PATTERNS)
    if unknown:
        parser.error(f"unknown patterns {sorted(unknown)}")
    for spec in args.configs or ():
        try:
            parse_config(spec)
        except ValueError as exc:
            parser.error(f"--configs: {exc}")
    return args


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
