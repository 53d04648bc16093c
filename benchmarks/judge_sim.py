"""An OpenAI-compatible judge simulator that models a fleet of vLLM servers. Judges nothing.

What it models (per replica of the fleet):
- **continuous batching with a maximum batch**: at most `max_batch` requests are in service at
  once; a request arriving while the batch is full waits in a FIFO queue (vLLM's
  `max_num_seqs` and its waiting queue). A request is sent to the replica with the fewest
  requests in service plus queued (a least-loaded router in front of the fleet).
- **cost per token**: a request holds its batch slot for
  `call_s + prompt_tokens * prefill_s + completion_tokens * decode_s` (tokens counted as
  characters / 4). The per-sequence speed does not change with the batch's occupancy (a
  server below its compute bound), so the fleet's capacity is `fleet * max_batch` slots.
- **optional 429s**: with `max_queue`, a request that finds that many already queued on its
  replica is refused with HTTP 429 and `Retry-After` (a hosted API's rate limit).

Answers are deterministic: the same prompt gets the same answer, whatever the order or the
concurrency, so rewards can be compared across arrival patterns:
- `stage_rubrics` (the stagewise rubric generator's schema): 10 rubrics (3/2/2/3 per stage,
  within the default caps) whose text depends on the question and on the SET of trajectories
  shown (not their order): a whole group gets the same rubrics whichever of its samples
  arrived first, and a partial group (other members) gets other rubrics, so its rewards
  differ from the whole group's, as a real judge's would;
- `score_sheet` (the stagewise verifier's `generate` design): each numbered rubric's score is
  a hash of the rubric's line and the trajectory section of the prompt;
- a one-token call with `top_logprobs` (the `choices` designs): `yes`/`no` log-probabilities
  from a hash of the prompt;
- any other `json_schema` / `json_object` schema: the smallest instance of the schema;
- no schema: a short text.

It reports its own time: `GET /sim/stats` gives the requests, tokens and slot-seconds per
kind, the slot-seconds and wall time the fleet was busy, the peak batch and queue, and the
429s; `POST /sim/reset` zeroes them. `benchmarks/rl_step.py` reads them to print the
judge-bound floor and the judge's utilisation.

    python benchmarks/judge_sim.py --port 9000 [--fleet 1] [--max-batch 256]
        [--call-s 0.02] [--prefill-ms 0.05] [--decode-ms 5] [--max-queue N]
"""

import argparse
import asyncio
import hashlib
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MODEL = "judge-sim"
CHARS_PER_TOKEN = 4.0

_QUESTION = re.compile(r"Question:\n<untrusted>(.*?)</untrusted>", re.S)
_TRAJECTORY = re.compile(r'<untrusted trajectory="\d+">\n(.*?)</untrusted>', re.S)
_RUBRIC_LINE = re.compile(r"^(\d+)\. (.*)$", re.M)
_GENERATED: dict[str, tuple[int, int]] = {
    "plan": (2, 1),
    "research": (1, 1),
    "review": (1, 1),
    "answer": (2, 1),
}
"""Positive and negative rubrics the simulated generator proposes per stage (3/2/2/3: the
default caps, so no rubric is pruned after a first group)."""
_WORDS = tuple(
    [
        "evidence",
        "sources",
        "constraints",
        "plan",
        "scope",
        "query",
        "pivot",
        "triangulation",
        "audit",
        "gaps",
        "claims",
        "answer",
        "structure",
        "citations",
        "dates",
        "figures",
        "coverage",
        "stopping",
        "rationale",
        "assumptions",
    ]
)


@dataclass(frozen=True)
class SimConfig:
    fleet: int = 1
    """Replicas (servers) behind the one endpoint."""
    max_batch: int = 256
    """Requests in service at once per replica (vLLM's `max_num_seqs`)."""
    call_s: float = 0.02
    """Fixed cost of a request (scheduling, the first step)."""
    prefill_s: float = 0.00005
    """Seconds per prompt token (0.05 ms: 20k tokens/s per sequence)."""
    decode_s: float = 0.005
    """Seconds per generated token (5 ms: 200 tokens/s per sequence)."""
    max_queue: int | None = None
    """Requests queued per replica beyond which a request gets 429 (None: never)."""
    retry_after_s: float = 1.0

    def __post_init__(self) -> None:
        if self.fleet < 1 or self.max_batch < 1:
            raise ValueError("fleet and max_batch must be >= 1")
        if min(self.call_s, self.prefill_s, self.decode_s) < 0:
            raise ValueError("costs must be >= 0")


def tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def _digest(*parts: str) -> int:
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return int.from_bytes(h.digest(), "big")


# ------------------------------------------------------------------------------ the answers


@dataclass(frozen=True)
class Answer:
    kind: str
    """`generation`, `scoring`, `choice`, `json` or `text`."""
    text: str
    logprobs: dict[str, Any] | None = None


def _user_text(messages: list[Mapping[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")


def _schema_of(body: Mapping[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping):
        return None, None
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        return spec.get("name"), spec.get("schema")
    if fmt.get("type") == "json_object":
        return None, fmt.get("schema")
    return None, None


def generated_rubrics(question: str, trajectories: list[str] | None = None) -> dict[str, Any]:
    """The simulated generator's rubrics for `question` and the group's `trajectories`
    (their order does not matter)."""
    h = _digest("rubrics", question, *sorted(trajectories or []))
    out: dict[str, Any] = {}
    for stage, (n_pos, n_neg) in _GENERATED.items():
        lists: dict[str, list[dict[str, Any]]] = {}
        for polarity, count in (("positive", n_pos), ("negative", n_neg)):
            items = []
            for i in range(count):
                k = _digest(str(h), stage, polarity, str(i))
                words = " ".join(_WORDS[(k >> (3 * j)) % len(_WORDS)] for j in range(14))
                verb = "shows" if polarity == "positive" else "fails at"
                items.append(
                    {
                        "title": f"{stage.title()} {polarity} criterion {k % 100000:05d}",
                        "description": f"The {stage} stage {verb} {words}.",
                        "weight": 1 + k % 3,
                    }
                )
            lists[f"{polarity}_rubrics"] = items
        out[stage] = lists
    return out


def score_sheet(user: str, n_rubrics: int) -> dict[str, Any]:
    """One score per rubric number 1..n: a hash of the rubric's line and the trajectory."""
    head, _, trajectory = user.partition("\nTrajectory:")
    lines = {int(m.group(1)): m.group(2) for m in _RUBRIC_LINE.finditer(head)}
    scores = []
    for index in range(1, n_rubrics + 1):
        k = _digest("score", lines.get(index, str(index)), trajectory)
        scores.append({"index": index, "justification": f"Checked item {k % 997}.", "score": k % 3})
    return {"scores": scores}


def minimal_instance(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> Any:
    """The smallest value of a JSON schema (objects with their required properties)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return minimal_instance(defs[str(schema["$ref"]).rsplit("/", 1)[-1]], defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return minimal_instance(schema[key][0], defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal_instance(props[name], defs) for name in schema.get("required", [])}
    if kind == "array":
        return [minimal_instance(schema.get("items", {}), defs)] * int(schema.get("minItems", 0))
    if kind == "string":
        return "x" * int(schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return True
    return None


def answer(body: Mapping[str, Any]) -> Answer:
    """The deterministic reply to a chat-completion request body."""
    messages = list(body.get("messages") or [])
    user = _user_text(messages)
    name, schema = _schema_of(body)
    top = body.get("top_logprobs")
    if body.get("logprobs") and top and int(body.get("max_tokens") or 0) <= 1:
        k = _digest("choice", json.dumps(messages, sort_keys=True))
        p_yes = (k % 1000 + 0.5) / 1000.0
        alternatives = [
            {"token": "yes", "logprob": math.log(p_yes)},
            {"token": "no", "logprob": math.log(1.0 - p_yes)},
        ]
        first = alternatives[0] if p_yes >= 0.5 else alternatives[1]
        content = [{**first, "top_logprobs": alternatives}]
        return Answer("choice", str(first["token"]), {"content": content})
    if name == "stage_rubrics" or (
        schema is not None and set(_GENERATED) <= set(schema.get("properties", {}))
    ):
        match = _QUESTION.search(user)
        question = match.group(1) if match else user
        shown = _TRAJECTORY.findall(user)
        return Answer("generation", json.dumps(generated_rubrics(question, shown)))
    if name == "score_sheet" or (
        schema is not None and set(schema.get("properties", {})) == {"scores"}
    ):
        items = (schema or {}).get("properties", {}).get("scores", {})
        n = items.get("minItems")
        if not n:
            n = len(_RUBRIC_LINE.findall(user.partition("\nTrajectory:")[0])) or 1
        return Answer("scoring", json.dumps(score_sheet(user, int(n))))
    if schema is not None:
        return Answer("json", json.dumps(minimal_instance(schema)))
    return Answer("text", f"Simulated answer {_digest('text', user) % 100000}.")


# ------------------------------------------------------------------------------ the fleet


@dataclass
class KindStats:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    service_s: float = 0.0
    """Slot-seconds: the sum of the requests' service times."""
    max_service_s: float = 0.0


@dataclass
class Replica:
    slots: asyncio.Semaphore
    in_service: int = 0
    queued: int = 0


@dataclass
class Stats:
    kinds: dict[str, KindStats] = field(default_factory=dict)
    rejected: int = 0
    max_in_service: int = 0
    max_queued: int = 0
    queue_wait_s: float = 0.0
    busy_wall_s: float = 0.0
    """Wall time with at least one request in service somewhere in the fleet."""
    first_arrival: float | None = None
    last_done: float | None = None


class JudgeSim:
    """The fleet and its OpenAI-compatible ASGI app (`__call__`)."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.replicas = [Replica(asyncio.Semaphore(config.max_batch)) for _ in range(config.fleet)]
        self.stats = Stats()
        self._in_service = 0
        self._busy_since = 0.0
        self._rr = 0
        self.fault: tuple[float, int, float] | None = None
        """(until, status, slowdown): until `time.monotonic()` passes `until`, every call is
        answered `status` at once (when not 200), else served `slowdown` times slower
        (`POST /sim/fault`, for the fault matrix: `benchmarks/faults.py`)."""
        self.faulted = 0

    def reset(self) -> None:
        self.stats = Stats()
        if self._in_service:
            self._busy_since = time.monotonic()

    def service_time(self, prompt_tokens: int, completion_tokens: int) -> float:
        c = self.config
        return c.call_s + prompt_tokens * c.prefill_s + completion_tokens * c.decode_s

    def _replica(self) -> Replica:
        self._rr = (self._rr + 1) % len(self.replicas)
        order = self.replicas[self._rr :] + self.replicas[: self._rr]
        return min(order, key=lambda r: r.in_service + r.queued)

    async def complete(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any], float]:
        """(status, response body, Retry-After seconds or 0) for one chat completion."""
        now = time.monotonic()
        stats = self.stats
        if stats.first_arrival is None:
            stats.first_arrival = now
        reply = answer(body)
        prompt_tokens = tokens(json.dumps(body.get("messages") or []))
        completion_tokens = 1 if reply.kind == "choice" else tokens(reply.text)
        slowdown = 1.0
        if self.fault is not None and now < self.fault[0]:
            _, fault_status, slowdown = self.fault
            if fault_status != 200:
                self.faulted += 1
                error = {"message": f"simulated judge failure {fault_status}", "type": "fault"}
                return fault_status, {"error": error}, self.config.retry_after_s
        replica = self._replica()
        limit = self.config.max_queue
        full = replica.in_service >= self.config.max_batch
        if limit is not None and full and replica.queued >= limit:
            stats.rejected += 1
            error = {"message": "simulated rate limit: queue full", "type": "rate_limit"}
            return 429, {"error": error}, self.config.retry_after_s
        service = self.service_time(prompt_tokens, completion_tokens) * slowdown
        if replica.slots.locked():  # the batch is full: wait in the replica's FIFO queue
            replica.queued += 1
            stats.max_queued = max(stats.max_queued, sum(r.queued for r in self.replicas))
            try:
                await replica.slots.acquire()
            finally:
                replica.queued -= 1
        else:
            await replica.slots.acquire()  # a free slot: taken without waiting
        started = time.monotonic()
        stats.queue_wait_s += started - now
        replica.in_service += 1
        self._enter(started)
        try:
            await asyncio.sleep(service)
        finally:
            replica.in_service -= 1
            replica.slots.release()
            self._leave(time.monotonic())
        kind = self.stats.kinds.setdefault(reply.kind, KindStats())
        kind.requests += 1
        kind.prompt_tokens += prompt_tokens
        kind.completion_tokens += completion_tokens
        kind.service_s += service
        kind.max_service_s = max(kind.max_service_s, service)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "stop"}
        if reply.logprobs is not None:
            choice["logprobs"] = reply.logprobs
        out = {
            "id": f"chatcmpl-{_digest(reply.text) % 10**12}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": MODEL,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return 200, out, 0.0

    def _enter(self, now: float) -> None:
        if self._in_service == 0:
            self._busy_since = now
        self._in_service += 1
        self.stats.max_in_service = max(self.stats.max_in_service, self._in_service)

    def _leave(self, now: float) -> None:
        self._in_service -= 1
        self.stats.last_done = now
        if self._in_service == 0:
            self.stats.busy_wall_s += now - self._busy_since

    def snapshot(self) -> dict[str, Any]:
        s = self.stats
        c = self.config
        return {
            "config": {
                "fleet": c.fleet,
                "max_batch": c.max_batch,
                "call_s": c.call_s,
                "prefill_s": c.prefill_s,
                "decode_s": c.decode_s,
                "max_queue": c.max_queue,
            },
            "kinds": {name: vars(k).copy() for name, k in s.kinds.items()},
            "requests": sum(k.requests for k in s.kinds.values()),
            "slot_s": sum(k.service_s for k in s.kinds.values()),
            "rejected": s.rejected,
            "faulted": self.faulted,
            "max_in_service": s.max_in_service,
            "max_queued": s.max_queued,
            "queue_wait_s": s.queue_wait_s,
            "busy_wall_s": s.busy_wall_s
            + (time.monotonic() - self._busy_since if self._in_service else 0.0),
            "in_service": self._in_service,
            "span_s": (s.last_done - s.first_arrival)
            if s.last_done is not None and s.first_arrival is not None
            else 0.0,
        }

    # --------------------------------------------------------------------------- ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        method, path = scope["method"], scope["path"].rstrip("/")
        retry_after = 0.0
        out: dict[str, Any]
        if method == "POST" and path.endswith("/chat/completions"):
            try:
                body = json.loads(b"".join(chunks) or b"{}")
            except ValueError:
                status, out = 400, {"error": {"message": "body is not JSON"}}
            else:
                status, out, retry_after = await self.complete(body)
        elif method == "GET" and path.endswith("/models"):
            status, out = 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
        elif method == "GET" and path in ("/health", "/sim/stats"):
            status, out = 200, self.snapshot() if path == "/sim/stats" else {"status": "ok"}
        elif method == "POST" and path == "/sim/fault":
            spec = json.loads(b"".join(chunks) or b"{}")
            until = time.monotonic() + float(spec.get("for_s", 20.0))
            self.fault = (until, int(spec.get("status", 200)), float(spec.get("slowdown", 1.0)))
            status, out = 200, {"status": "fault set"}
        elif method == "POST" and path == "/sim/reset":
            self.reset()
            status, out = 200, {"status": "reset"}
        else:
            status, out = 404, {"error": {"message": f"no route {method} {path}"}}
        payload = json.dumps(out).encode()
        headers = [(b"content-type", b"application/json")]
        if retry_after:
            headers.append((b"retry-after", f"{retry_after:g}".encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--fleet", type=int, default=1)
    parser.add_argument("--max-batch", type=int, default=256)
    parser.add_argument("--call-s", type=float, default=0.02)
    parser.add_argument("--prefill-ms", type=float, default=0.05, help="ms per prompt token")
    parser.add_argument("--decode-ms", type=float, default=5.0, help="ms per generated token")
    parser.add_argument("--max-queue", type=int, default=None, help="429 beyond this queue")
    parser.add_argument("--retry-after-s", type=float, default=1.0)
    args = parser.parse_args()
    import uvicorn

    sim = JudgeSim(
        SimConfig(
            fleet=args.fleet,
            max_batch=args.max_batch,
            call_s=args.call_s,
            prefill_s=args.prefill_ms / 1000,
            decode_s=args.decode_ms / 1000,
            max_queue=args.max_queue,
            retry_after_s=args.retry_after_s,
        )
    )
    uvicorn.run(
        sim,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        backlog=8192,
        timeout_keep_alive=600,
    )


if __name__ == "__main__":
    main()
