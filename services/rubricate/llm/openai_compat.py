"""OpenAICompatBackend: any OpenAI-compatible chat server over HTTP (vLLM, llama.cpp, OpenAI).

Failures map onto the retry policy: connection errors, timeouts, 5xx, 429 and an unreadable
body are `TransportError` (retryable); other 4xx are `BackendRequestError`.

JSON schemas: OpenAI and vLLM take `response_format={"type": "json_schema", "json_schema":
{"name", "schema", "strict": true}}`. llama-cpp-python's server (0.3.x) only knows `text` and
`json_object`: it answers `json_schema` with HTTP 500 (a pydantic `literal_error` on
`response_format.type`) and instead accepts `{"type": "json_object", "schema": ...}`, which it
compiles to a grammar. With `schema_mode="auto"` (the default) the backend sends
`json_schema` first; if the server refuses it with an error that names `response_format`,
the same request is sent once more as `json_object` + `schema`, and that mode sticks for the
rest of the backend's life. `schema_mode` pins either format instead.

Choice scoring (the `choices` designs): one chat completion of ONE token with `logprobs` and
`top_logprobs` (`choice_top_logprobs`, 20 by default); each choice's log-probability is read
at the reply's first position from the alternative whose text is the longest prefix of the
choice (`yes`, `no`; `support`, `partial`, `not` after `["`), the token the model's
tokenizer starts the choice with. A choice absent from the top alternatives gets the
smallest listed log-probability, an upper bound (its true value is lower): with 20
alternatives this only happens where the judge puts almost no mass on it. A reply prefix is
sent as a final assistant message with `continue_final_message` (vLLM), only where
`openai_continue_final_message` says the server honours it. A server that returns no
log-probabilities is found at start-up (`choice_scoring_problem`). vLLM returns the raw
model log-probabilities and llama-cpp-python's server the log-softmax of the logits, the
same numbers the embedded backend reads.

Chat completions go through the lean HTTP client (`common.lean_http`: a fraction of httpx's
CPU per call) where it applies, a plain `http://` server with no proxy configured for it;
httpx serves the rest (https, proxies, a transport passed in) and the model list.

Every call is bounded by the deadline of the request being served (`common.upstream`): its
timeout is the time left, and a call with no time left is not sent (`DeadlineExceeded`).
How many calls are in flight is the call limiter's business (`llm.limiter`, in front of
every backend the factory builds); a 429 or 5xx carries its status and the server's
`Retry-After` on the `TransportError`, which the limiter and the retries honour. A backend
constructed by hand may cap its calls itself (`concurrency`).
"""

import asyncio
import logging
import math
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Final

import httpx

from rubricate.common import lean_http
from rubricate.common.deadlines import time_left
from rubricate.common.http_pool import ShardedClient
from rubricate.llm.base import ChoiceScores, Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import BackendRequestError, DeadlineExceeded, TransportError
from rubricate.llm.openai_format import chat_messages, completion_from_response
from rubricate.llm.prompt_text import neutralized_messages
from rubricate.llm.settings import LLMSettings, SchemaMode

log = logging.getLogger("rubricate.llm.openai")

_SNIPPET_CHARS = 500
MIN_CALL_S: Final = 0.05
"""A judge call is not sent with less of the request's deadline left than this."""
NO_LOGPROBS: Final = "returned no log-probabilities (logprobs/top_logprobs)"
_PROBE: Final = (Message("user", "Is water wet? Reply yes or no."),)


Answer = httpx.Response | lean_http.Response
"""A server's answer, from either client (the same attributes are read of both)."""


def _snippet(response: Answer) -> str:
    text = " ".join(response.text.split())
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "…"


class OpenAICompatBackend(LLMBackend):
    name = "openai"
    supports_choice_scoring = True  # confirmed (or withdrawn) by `choice_scoring_problem`

    def __init__(
        self,
        *,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        schema_mode: SchemaMode = "auto",
        max_connections: int = 64,
        concurrency: int | None = None,
        top_logprobs: int = 20,
        continue_final_message: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if (concurrency is not None and concurrency < 1) or not 2 <= top_logprobs <= 20:
            raise ValueError("concurrency must be >= 1 and top_logprobs within 2..20")
        self.supports_reply_prefix = continue_final_message
        self.top_logprobs = top_logprobs
        self.concurrency = concurrency
        self._gate = None if concurrency is None else asyncio.Semaphore(concurrency)
        self.base_url = base_url.rstrip("/")
        self.model = model or "default"
        self._model_known = model is not None
        self._discovery_done = model is not None
        self.schema_mode: SchemaMode = schema_mode
        self.timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._pool = ShardedClient(  # hundreds of judge calls in flight, a short pool walk
            max_connections=max_connections,
            base_url=self.base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            transport=transport,
        )
        self._lean = (
            lean_http.LeanClient(self.base_url, headers=headers, max_connections=max_connections)
            if transport is None and lean_http.applies(self.base_url)
            else None
        )
        """The chat completions' client where it applies (else httpx's pool serves them)."""

    @classmethod
    def from_settings(
        cls, settings: LLMSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> "OpenAICompatBackend":
        if not settings.base_url:
            raise BackendRequestError("the openai backend needs RUBRICATE_LLM_BASE_URL")
        return cls(
            base_url=settings.base_url,
            model=settings.model,
            api_key=settings.api_key.get_secret_value() if settings.api_key else None,
            timeout_s=settings.timeout_s,
            schema_mode=settings.openai_schema_mode,
            max_connections=settings.http_connections(),
            top_logprobs=settings.choice_top_logprobs,
            continue_final_message=settings.openai_continue_final_message,
            transport=transport,
        )

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        if not self._discovery_done:
            await self._discover_model()
        started = time.perf_counter()
        response = await self._post(self._body(messages, params))
        if (
            params.json_schema is not None
            and self.schema_mode == "auto"
            and response.status_code >= 400
            and response.status_code != 429
            and "response_format" in response.text
        ):
            log.warning(
                "openai.schema_mode_fallback url=%s status=%d: json_schema refused, "
                "using json_object with a schema from now on",
                self.base_url,
                response.status_code,
            )
            self.schema_mode = "json_object"
            response = await self._post(self._body(messages, params))
        latency = time.perf_counter() - started
        return self._completion(response, latency)

    def _body(self, messages: Sequence[Message], params: GenerationParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            # the server tokenizes the rendered template with special tokens on: a control
            # token spelled in a message's text would act as one (GitHub issue 17)
            "messages": chat_messages(neutralized_messages(messages)),
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if self._model_known:
            body["model"] = self.model
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if params.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = params.logprobs
        if params.json_schema is not None:
            if self.schema_mode == "json_object":
                body["response_format"] = {"type": "json_object", "schema": params.json_schema}
            else:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": params.schema_name,
                        "schema": params.json_schema,
                        "strict": True,
                    },
                }
        return body

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        if reply_prefix and not self.supports_reply_prefix:
            raise BackendRequestError(
                f"the server at {self.base_url} is not known to continue a reply prefix "
                f"({reply_prefix!r}): set RUBRICATE_LLM_OPENAI_CONTINUE_FINAL_MESSAGE=true "
                "for a server that honours continue_final_message (vLLM)"
            )
        if not self._discovery_done:
            await self._discover_model()
        started = time.perf_counter()
        response = await self._post(self._choice_body(messages, reply_prefix))
        latency = time.perf_counter() - started
        data = self._json(response)
        try:
            top, prompt_tokens = first_token_alternatives(data)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise TransportError(
                f"malformed response from {self.base_url}/chat/completions "
                f"({type(exc).__name__}: {exc}): {_snippet(response)}"
            ) from exc
        if top is None:
            raise BackendRequestError(f"the server at {self.base_url} {NO_LOGPROBS}")
        return ChoiceScores(
            logprobs=choice_logprobs(top, choices),
            prompt_tokens=prompt_tokens,
            latency_s=latency,
            model=self.model,
            backend=self.name,
        )

    def _choice_body(self, messages: Sequence[Message], reply_prefix: str) -> dict[str, Any]:
        body = self._body(messages, GenerationParams(max_tokens=1, logprobs=self.top_logprobs))
        if reply_prefix:
            body["messages"].append({"role": "assistant", "content": reply_prefix})
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
        return body

    async def choice_scoring_problem(self) -> str | None:
        """One one-token request with `top_logprobs`: None when the server returns them.
        An unreachable server cannot be asked: the check is skipped (logged), and a call
        that gets no log-probabilities later fails with `BackendRequestError`."""
        try:
            response = await self._post(self._choice_body(_PROBE, ""))
            data = self._json(response)
            top, _ = first_token_alternatives(data)
        except TransportError as exc:
            log.warning("openai.choice_probe_skipped url=%s error=%s", self.base_url, exc)
            return None
        except (BackendRequestError, KeyError, IndexError, TypeError, ValueError) as exc:
            return f"the server at {self.base_url} cannot score choices: {exc}"
        if not top:
            return f"the server at {self.base_url} {NO_LOGPROBS}"
        return None

    async def _post(self, body: dict[str, Any]) -> Answer:
        url = f"{self.base_url}/chat/completions"
        gate: AbstractAsyncContextManager[object] = (
            nullcontext() if self._gate is None else self._gate
        )
        async with gate:
            left = time_left()
            if left is not None and left < MIN_CALL_S:
                raise DeadlineExceeded(
                    f"the request's deadline passed before the call to {url} "
                    f"({max(left, 0.0):.2f}s left)"
                )
            timeout = self.timeout_s if left is None else min(self.timeout_s, left)
            try:
                if self._lean is not None:
                    return await self._lean.post_json(
                        "chat/completions", lean_http.dump_json(body), timeout_s=timeout
                    )
                return await self._pool.next().post(
                    "chat/completions",
                    json=body,
                    timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
                )
            except httpx.TimeoutException as exc:
                if left is not None and left <= self.timeout_s:
                    raise DeadlineExceeded(
                        f"the request's deadline passed during the call to {url} "
                        f"({left:.2f}s were left)"
                    ) from exc
                raise TransportError(
                    f"timeout after {self.timeout_s:g}s calling {url} ({type(exc).__name__})"
                ) from exc
            except httpx.HTTPError as exc:
                raise TransportError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from exc

    def _answered(self, response: Answer) -> str:
        """Where a successful answer came from (for error messages); a failed one raised:
        429 and 5xx as a retryable `TransportError`, any other as `BackendRequestError`."""
        status = response.status_code
        where = f"{self.base_url}/chat/completions"
        if status == 429 or status >= 500:
            raise overloaded(response, where)
        if status >= 300:
            raise BackendRequestError(f"HTTP {status} from {where}: {_snippet(response)}")
        return where

    def _json(self, response: Answer) -> dict[str, Any]:
        """The body of a successful answer; failures raised as in `_completion`."""
        where = self._answered(response)
        try:
            data = response.json()
        except ValueError as exc:
            raise TransportError(f"unreadable response from {where}: {_snippet(response)}") from exc
        if not isinstance(data, dict):
            raise TransportError(f"malformed response from {where}: {_snippet(response)}")
        return data

    def _completion(self, response: Answer, latency: float) -> Completion:
        where = self._answered(response)
        try:
            return completion_from_response(
                response.json(), latency_s=latency, model=self.model, backend=self.name
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise TransportError(
                f"malformed response from {where} ({type(exc).__name__}: {exc}): "
                f"{_snippet(response)}"
            ) from exc

    async def _discover_model(self) -> None:
        """Without a configured model name, use the first model the server lists (asked
        until the server answers once; without an answer requests carry no model name)."""
        try:
            response = await self._pool.next().get("models", timeout=min(self.timeout_s, 10.0))
        except httpx.HTTPError:
            return
        self._discovery_done = True
        try:
            model = response.json()["data"][0]["id"] if response.status_code == 200 else None
        except (ValueError, KeyError, IndexError, TypeError):
            return
        if isinstance(model, str) and model:
            self.model = model
            self._model_known = True

    async def ready(self) -> bool:
        try:
            response = await self._pool.next().get("models", timeout=min(self.timeout_s, 5.0))
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def aclose(self) -> None:
        if self._lean is not None:
            await self._lean.aclose()
        await self._pool.aclose()


def overloaded(response: Answer, where: str) -> TransportError:
    """A 429 or 5xx answer: retryable, with its status and the server's Retry-After."""
    wait = retry_after_s(response.headers.get("retry-after"))
    said = "" if wait is None else f" (Retry-After {wait:g}s)"
    return TransportError(
        f"HTTP {response.status_code} from {where}{said}: {_snippet(response)}",
        status=response.status_code,
        retry_after_s=wait,
    )


def retry_after_s(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds a `Retry-After` header asks for (delay-seconds or an HTTP date); None when
    absent or unreadable. A date in the past is 0."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def first_token_alternatives(
    response: Mapping[str, Any],
) -> tuple[dict[str, float] | None, int]:
    """The top alternatives (text → log-probability) at the reply's first token, or None
    when the response carries no log-probabilities; and the prompt tokens it reports.
    Where two alternatives decode to the same text the likelier is kept."""
    choice = response["choices"][0]
    usage = response.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not content:
        return None, prompt_tokens
    top: dict[str, float] = {}
    for item in content[0].get("top_logprobs") or []:
        token, value = str(item["token"]), float(item["logprob"])
        if token not in top or value > top[token]:
            top[token] = value
    return top or None, prompt_tokens


def choice_logprobs(top: Mapping[str, float], choices: Sequence[str]) -> dict[str, float]:
    """Each choice's log-probability among the first token's alternatives `top`.

    A choice's token is the longest alternative its text starts with; a choice with none
    gets the smallest listed log-probability (an upper bound). Raises `BackendRequestError`
    when two choices would be read from the same token (they cannot be told apart)."""
    floor = min(top.values())
    out: dict[str, float] = {}
    used: dict[str, str] = {}
    for choice in choices:
        candidates = [t for t in top if t and choice.startswith(t)]
        if not candidates:
            out[choice] = floor
            continue
        token = max(candidates, key=len)
        if token in used:
            raise BackendRequestError(
                f"choices {used[token]!r} and {choice!r} share their first token {token!r}: "
                "they cannot be told apart in one step"
            )
        used[token] = choice
        out[choice] = top[token]
    return out
