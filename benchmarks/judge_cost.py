"""Judge cost at RL scale: what one stagewise group costs the judge, three ways, against the
same OpenAI-compatible server. Prints figures; asserts nothing.

(a) Rubricate `generate`: one JSON score sheet per rollout (the verifier's generate design).
(b) Rubricate `choices`: one forward pass per rubric, p(yes) read from the first token's
    log-probabilities (the verifier's choices design on a served backend).
(c) Baseline: one judge call per (rubric, response), the pattern of DR Tulu's evolving-rubric
    reward (open-instruct): a system prompt with the 0–2 scale, a user message
    `<question>…</question><response>…</response><criterion>…</criterion>`, a free-text reply
    holding `{"score": x}`, every call issued at once. The response is the whole trajectory.

Groups: cases of the shipped stagewise evaluation set (`rubricate/examples/stagewise_eval.jsonl`),
each the original trajectory and degraded versions of it (`rubricate.evaluation.degrade`), 8
rollouts; rubrics at the paper's caps (active 3/2/2/3 per stage, RubricEM App. C) plus one
persistent answer rubric per vital nugget of the case. (a) and (b) run the verifier's own
service code (`StageScoringService`), one request per rollout sent at once as the gateway does.

Per design: judge calls, prompt tokens, prompt tokens NOT served from a cached prefix,
completion tokens, wall time per group, and the ratios of (a) and (b) to (c). Uncached
tokens come from the server: vLLM's `usage.prompt_tokens_details.cached_tokens`
(`--enable-prompt-tokens-details`), llama.cpp's `llama-server` `timings.prompt_n`, or, for
llama-cpp-python's server (started here), its log's "prefix-match hit" lines.

By default the script starts (a fresh one for each design, so no design reads prompts
another cached) `python -m llama_cpp.server` with the embedded model
(Qwen2.5-Coder-1.5B-Instruct Q4_K_M; `--model smollm2` for the 135M wiring model) on
loopback. llama-cpp-python's server decodes one sequence at a time with one KV cache (no
parallel slots), so the judge concurrency is 1 there. Run it under the model lock:

    flock /tmp/rubricate-model.lock .venv/bin/python benchmarks/judge_cost.py [--groups 1]

Against a running server (a GPU):

    vllm serve Qwen/Qwen2.5-7B-Instruct --enable-prefix-caching \\
        --enable-prompt-tokens-details --max-logprobs 20 --port 8000
    python benchmarks/judge_cost.py --base-url http://127.0.0.1:8000/v1 --concurrency 64
"""

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import httpx

from rubricate.core.rubrics import make_rubric
from rubricate.evaluation.degrade import Case, derive, render
from rubricate.evaluation.stagewise import SHIPPED_SET, load_cases
from rubricate.llm.base import GenerationParams, Message
from rubricate.llm.model_files import locate_smollm2, resolve_model_path
from rubricate.llm.openai_compat import OpenAICompatBackend
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.stagewise.domain.stages import parse_stages
from rubricate.stagewise.verifier.schemas import StageScoresRequest
from rubricate.stagewise.verifier.service import StageScoringService
from rubricate_client.constants import ACTIVE_CAPS, STAGES
from rubricate_client.schemas.rubrics import Rubric, RubricSpec, Stage

ROLLOUTS: Final = 8
DESIGNS: Final = ("generate", "choices", "baseline")

# Rubrics a rubric generator would propose for a search agent, per stage, in the order
# they fill the caps (ACTIVE_CAPS: 3 plan, 2 research, 2 review, 3 answer).
ACTIVE: Final[dict[Stage, list[tuple[str, str, str]]]] = {
    "plan": [
        (
            "Decomposes the question",
            "The plan splits the question into searchable parts.",
            "positive",
        ),
        (
            "Targets key entities",
            "Each planned search names the entity or population asked about.",
            "positive",
        ),
        (
            "Vague plan",
            "The plan lists generic searches unrelated to the question's specifics.",
            "negative",
        ),
    ],
    "research": [
        ("Queries follow the plan", "The searches run match the planned searches.", "positive"),
        (
            "Off-topic searching",
            "Searches drift to topics the question does not ask about.",
            "negative",
        ),
    ],
    "review": [
        (
            "Checks coverage",
            "The review states which sources cover which parts of the question.",
            "positive",
        ),
        (
            "Plans the answer",
            "The review gives a writing plan grounded in the sources found.",
            "positive",
        ),
    ],
    "answer": [
        (
            "Cites sources",
            "Every factual sentence of the answer cites a numbered source.",
            "positive",
        ),
        (
            "Answers the question",
            "The answer directly addresses what was asked, with figures where asked.",
            "positive",
        ),
        (
            "Unsupported claims",
            "The answer states facts that none of the retrieved sources support.",
            "negative",
        ),
    ],
}

BASELINE_SYSTEM: Final = (
    "You are given a question (in <question> tags), a response an assistant gave to it (in "
    "<response> tags) and one criterion (in <criterion> tags). Rate on a scale from 0 to 2 how "
    "well the response satisfies the criterion, judging only that criterion and nothing else "
    'about the response. Reply with JSON of the form {"score": x}.'
)
"""The baseline's judge instructions: the content of DR Tulu's rubric-scoring prompt, in our
words. A negative criterion is scored the same way (its weight is negative there)."""
BASELINE_MAX_TOKENS: Final = 64

_PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit")


def group_rubrics(case: Case) -> list[Rubric]:
    rubrics = [
        make_rubric(
            spec=RubricSpec(title=title, description=description, polarity=polarity),
            stage=stage,
            origin="active",
        )
        for stage in STAGES
        for title, description, polarity in ACTIVE[stage][: ACTIVE_CAPS[stage]]
    ]
    for n, fact in enumerate(case.vital, start=1):
        spec = RubricSpec(
            title=f"States vital fact {n}", description=f"The answer states: {fact.nugget}"
        )
        rubrics.append(make_rubric(spec=spec, stage="answer", origin="persistent"))
    return rubrics


def group_trajectories(case: Case, cases: Sequence[Case]) -> list[str]:
    """The original and its degraded versions (two seeds), distinct, `ROLLOUTS` of them."""
    texts = [render(case)]
    for seed in (0, 1, 2):
        for variant in derive(case, others=cases, seed=seed):
            text = render(variant.case)
            if text not in texts:
                texts.append(text)
    return (texts * ROLLOUTS)[:ROLLOUTS]


@dataclass
class Cost:
    calls: int = 0
    prompt: int = 0
    uncached: int | None = 0
    completion: int = 0
    walls: list[float] = field(default_factory=list)

    def add_uncached(self, n: int | None) -> None:
        self.uncached = None if self.uncached is None or n is None else self.uncached + n


class Recorder(httpx.AsyncBaseTransport):
    """Counts the judge's successful chat completions and the usage the server reports."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.cost = Cost()
        self.server_uncached: int | None = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if not request.url.path.endswith("/chat/completions"):
            return response
        body = await response.aread()
        await response.aclose()
        if response.status_code == 200:
            data = json.loads(body)
            usage = data.get("usage") or {}
            prompt = int(usage.get("prompt_tokens") or 0)
            self.cost.calls += 1
            self.cost.prompt += prompt
            self.cost.completion += int(usage.get("completion_tokens") or 0)
            details = usage.get("prompt_tokens_details") or {}
            timings = data.get("timings") or {}
            if "cached_tokens" in details:
                uncached: int | None = prompt - int(details["cached_tokens"] or 0)
            elif "prompt_n" in timings:
                uncached = int(timings["prompt_n"])
            else:
                uncached = None
            self.server_uncached = (
                None
                if self.server_uncached is None or uncached is None
                else self.server_uncached + uncached
            )
        return httpx.Response(
            response.status_code, headers=response.headers, content=body, request=request
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def stage_requests(
    question: str, trajectories: Sequence[str], rubrics: Sequence[Rubric]
) -> list[StageScoresRequest]:
    """What the gateway sends the verifier: each rollout's stage texts and the rubrics of
    the stages it has."""
    out = []
    for trajectory in trajectories:
        spans = parse_stages(trajectory)
        stages = {s: spans.text(trajectory, s) for s in STAGES}
        judged = [r for r in rubrics if r.stage not in spans.missing]
        out.append(StageScoresRequest(question=question, stages=stages, rubrics=judged))
    return out


async def run_rubricate(
    design: str,
    backend: OpenAICompatBackend,
    llm: LLMSettings,
    requests: Sequence[StageScoresRequest],
) -> None:
    service = StageScoringService(
        backend=backend,
        tasks=TaskSettings(scoring_design=design),
        llm=llm,
    )
    outs = await asyncio.gather(
        *(service.stage_scores(r) for r in requests), return_exceptions=True
    )
    failed = [o for o in outs if isinstance(o, BaseException)]
    if failed:  # still paid for: their tokens are counted
        print(f"  {design}: {len(failed)} of {len(outs)} requests failed: {failed[0]}"[:300])


async def run_baseline(
    backend: OpenAICompatBackend,
    question: str,
    trajectories: Sequence[str],
    rubrics: Sequence[Rubric],
) -> list[float | None]:
    """One call per (rubric, response), all at once; the score parsed as DR Tulu does
    (a reply without a readable score counts 0 there; here it is reported as None)."""
    params = GenerationParams(max_tokens=BASELINE_MAX_TOKENS)

    async def one(trajectory: str, rubric: Rubric) -> float | None:
        user = (
            f"<question>{question}</question>\n<response>{trajectory}</response>\n"
            f"<criterion>{rubric.title}: {rubric.description}</criterion>"
        )
        reply = await backend.complete(
            [Message("system", BASELINE_SYSTEM), Message("user", user)], params
        )
        found = re.search(r'"score"\s*:\s*([0-9.]+)', reply.text)
        return float(found.group(1)) / 2 if found else None

    return list(await asyncio.gather(*(one(t, r) for t in trajectories for r in rubrics)))


def log_reuse(log_path: Path | None, start: int) -> tuple[int, int]:
    """(prompt tokens served from the KV cache, log size) since byte `start` of the
    llama-cpp-python server's log."""
    if log_path is None:
        return 0, 0
    data = log_path.read_bytes()
    text = data[start:].decode("utf-8", "replace")
    return sum(int(m) for m in _PREFIX_HIT.findall(text)), len(data)


async def flush(backend: OpenAICompatBackend) -> None:
    """One unrelated short call, so a design does not start on the previous one's prefix."""
    await backend.complete([Message("user", "Say OK.")], GenerationParams(max_tokens=2))


async def reset_prefix_cache(base_url: str) -> bool:
    """Empty a running server's prefix cache between designs (vLLM's `/reset_prefix_cache`,
    served with `VLLM_SERVER_DEV_MODE=1`); False where the server has no such endpoint."""
    root = base_url.removesuffix("/").removesuffix("/v1")
    async with httpx.AsyncClient(timeout=60) as client:
        try:
            response = await client.post(f"{root}/reset_prefix_cache")
        except httpx.HTTPError:
            return False
    return response.status_code == 200


async def measure(
    args: argparse.Namespace, base_url: str, log_path: Path | None, designs: Sequence[str]
) -> dict[str, Cost]:
    cases = load_cases(SHIPPED_SET)
    llm = LLMSettings(
        backend="openai",
        base_url=base_url,
        concurrency=args.concurrency,
        prefix_cache=args.prefix_cache,
        cache="off",
        openai_schema_mode=args.schema_mode,
        timeout_s=3600,
    )
    costs = {d: Cost() for d in DESIGNS}
    for case in cases[: args.groups]:
        trajectories = group_trajectories(case, cases)
        rubrics = group_rubrics(case)
        requests = stage_requests(case.question, trajectories, rubrics)
        print(
            f"group {case.topic_id}: {len(trajectories)} rollouts, {len(rubrics)} rubrics, "
            f"{sum(len(r.rubrics) for r in requests)} (rollout, rubric) pairs",
            flush=True,
        )
        for design in designs:
            if not (log_path or await reset_prefix_cache(base_url)):
                print(
                    f"  note: could not empty the server's prefix cache before {design}; "
                    "it may read prompts an earlier design cached",
                    flush=True,
                )
            recorder = Recorder()
            backend = OpenAICompatBackend.from_settings(llm, transport=recorder)
            await flush(backend)
            recorder.cost = Cost()
            recorder.server_uncached = 0
            _, start = log_reuse(log_path, 0)
            started = time.perf_counter()
            if design == "baseline":
                scores = await run_baseline(backend, case.question, trajectories, rubrics)
                unread = sum(1 for s in scores if s is None)
                if unread:
                    print(f"  baseline: {unread} replies without a readable score", flush=True)
            else:
                await run_rubricate(design, backend, llm, requests)
            wall = time.perf_counter() - started
            await backend.aclose()
            reused, _ = log_reuse(log_path, start)
            cost = costs[design]
            cost.calls += recorder.cost.calls
            cost.prompt += recorder.cost.prompt
            cost.completion += recorder.cost.completion
            if recorder.server_uncached is not None:
                cost.add_uncached(recorder.server_uncached)
            elif log_path is not None:
                cost.add_uncached(recorder.cost.prompt - reused)
            else:
                cost.add_uncached(None)
            cost.walls.append(wall)
            print(
                f"  {design:<9} calls {recorder.cost.calls:>4}  prompt {recorder.cost.prompt:>7}  "
                f"completion {recorder.cost.completion:>6}  wall {wall:7.1f} s",
                flush=True,
            )
    return costs


def report(costs: dict[str, Cost], groups: int) -> None:
    base = costs.get("baseline")
    print(f"\n== per group (mean of {groups}) ==")
    head = (
        f"{'design':<10}{'calls':>8}{'prompt':>10}{'uncached':>10}{'completion':>12}{'wall s':>9}"
    )
    print(head)
    for design, cost in costs.items():
        if not cost.walls:
            continue
        n = len(cost.walls)
        uncached = "n/a" if cost.uncached is None else f"{cost.uncached / n:.0f}"
        print(
            f"{design:<10}{cost.calls / n:>8.0f}{cost.prompt / n:>10.0f}{uncached:>10}"
            f"{cost.completion / n:>12.0f}{statistics.fmean(cost.walls):>9.1f}"
        )
    if base is None or not base.walls:
        return
    print("\n== ratio to the baseline (c) ==")
    for design in ("generate", "choices"):
        mine = costs.get(design)
        if mine is None or not mine.walls:
            continue
        cost = mine

        def ratio(a: float | None, b: float | None) -> str:
            return "n/a" if a is None or b is None or b == 0 else f"{a / b:.3f}"

        print(
            f"{design:<10} calls {ratio(cost.calls, base.calls)}  "
            f"prompt {ratio(cost.prompt, base.prompt)}  "
            f"uncached {ratio(cost.uncached, base.uncached)}  "
            f"completion {ratio(cost.completion, base.completion)}  "
            f"wall {ratio(sum(cost.walls), sum(base.walls))}"
        )


def start_server(args: argparse.Namespace, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    model = locate_smollm2() if args.model == "smollm2" else resolve_model_path(LLMSettings())
    port = args.port
    if args.llama_server:
        # llama.cpp's C++ server: `--parallel` slots decoded together (continuous batching),
        # each slot keeping its prompt's KV cache for the next request sent to it; the
        # context is per slot. It reports `timings.prompt_n`: the prompt tokens it computed.
        command = [
            str(args.llama_server),
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--ctx-size",
            str(args.n_ctx * args.parallel),
            "--parallel",
            str(args.parallel),
            "--threads",
            str(args.threads),
            "--cont-batching",
            "--no-webui",
        ]
        what = (
            f"llama-server: {model.name}, {args.parallel} slots of {args.n_ctx} tokens, "
            f"{args.threads} threads"
        )
    else:
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(args.n_ctx),
            "--n_threads",
            str(args.threads),
            "--verbose",
            "true",
        ]
        what = (
            f"llama-cpp-python server: {model.name}, n_ctx {args.n_ctx}, "
            f"{args.threads} threads, one sequence at a time"
        )
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"llama.cpp server exited:\n{log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                print(what, flush=True)
                return process, base_url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise SystemExit("llama.cpp server did not start in 180 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=1, help="groups of the evaluation set (1)")
    parser.add_argument("--designs", nargs="+", choices=DESIGNS, default=list(DESIGNS))
    parser.add_argument("--base-url", help="a running OpenAI-compatible server (…/v1)")
    parser.add_argument("--model", choices=("qwen", "smollm2"), default="qwen")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="judge calls in flight (1 for the spawned llama-cpp-python server)",
    )
    parser.add_argument(
        "--schema-mode", default=None, choices=("auto", "json_schema", "json_object")
    )
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--port", type=int, default=18765)
    parser.add_argument(
        "--llama-server",
        type=Path,
        help="start this llama.cpp `llama-server` binary (make llama-server builds one) "
        "instead of llama-cpp-python's server",
    )
    parser.add_argument(
        "--parallel", type=int, default=4, help="llama-server slots (with --llama-server)"
    )
    parser.add_argument(
        "--prefix-cache",
        choices=("shared", "per_slot"),
        default=None,
        help="the server's prefix cache, which orders Rubricate's passes (llm.request_gate): "
        "per_slot with --llama-server, else shared",
    )
    args = parser.parse_args()
    spawned = args.base_url is None
    if args.prefix_cache is None:
        args.prefix_cache = "per_slot" if args.llama_server else "shared"
    python_server = spawned and args.llama_server is None
    if args.concurrency is None:
        args.concurrency = 1 if python_server else (args.parallel if spawned else 16)
    if args.schema_mode is None:
        args.schema_mode = "json_object" if python_server else "auto"
    if not spawned:
        report(asyncio.run(measure(args, args.base_url, None, args.designs)), args.groups)
        return
    # a fresh server for each design: llama-server keeps prompts it evicts from a slot in RAM
    # (--cache-ram) and would serve one design's prompts from another's cache
    costs: dict[str, Cost] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for design in args.designs:
            log_path = Path(tmp) / f"server-{design}.log"
            process, base_url = start_server(args, log_path)
            try:
                costs |= {design: asyncio.run(measure(args, base_url, log_path, [design]))[design]}
            finally:
                process.terminate()
                process.wait(timeout=30)
    report(costs, args.groups)


if __name__ == "__main__":
    main()
