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
"""

import logging
import time
from collections.abc import Sequence
from typing import Any

import httpx

from rubricate.llm.base import Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import BackendRequestError, TransportError
from rubricate.llm.openai_format import chat_messages, completion_from_response
from rubricate.llm.settings import LLMSettings, SchemaMode

log = logging.getLogger("rubricate.llm.openai")

_SNIPPET_CHARS = 500


def _snippet(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "…"


class OpenAICompatBackend(LLMBackend):
    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        schema_mode: SchemaMode = "auto",
        max_connections: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model or "default"
        self._model_known = model is not None
        self._discovery_done = model is not None
        self.schema_mode: SchemaMode = schema_mode
        self.timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            transport=transport,
        )

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
            max_connections=settings.max_connections,
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
            "messages": chat_messages(messages),
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

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        url = f"{self.base_url}/chat/completions"
        try:
            return await self._client.post("chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise TransportError(
                f"timeout after {self.timeout_s:g}s calling {url} ({type(exc).__name__})"
            ) from exc
        except httpx.HTTPError as exc:
            raise TransportError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from exc

    def _completion(self, response: httpx.Response, latency: float) -> Completion:
        status = response.status_code
        where = f"{self.base_url}/chat/completions"
        if status == 429 or status >= 500:
            raise TransportError(f"HTTP {status} from {where}: {_snippet(response)}")
        if status >= 300:
            raise BackendRequestError(f"HTTP {status} from {where}: {_snippet(response)}")
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
            response = await self._client.get("models", timeout=min(self.timeout_s, 10.0))
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
            response = await self._client.get("models", timeout=min(self.timeout_s, 5.0))
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def aclose(self) -> None:
        await self._client.aclose()
