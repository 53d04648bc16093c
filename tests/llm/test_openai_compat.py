"""OpenAICompatBackend's protocol and error mapping, against scripted HTTP responses."""

import json
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from rubricate.llm.base import GenerationParams, Message, TokenLogprob
from rubricate.llm.errors import BackendRequestError, TransportError
from rubricate.llm.openai_compat import OpenAICompatBackend
from rubricate.llm.settings import LLMSettings

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
MESSAGES = [Message("system", "s"), Message("user", "u")]


def ok_body(content: str = '{"a": 1}', **extra: object) -> dict[str, object]:
    choice: dict[str, object] = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
    }
    choice.update(extra)
    return {
        "id": "x",
        "model": "served",
        "choices": [choice],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


Handler = Callable[[httpx.Request], httpx.Response]


class Server:
    """Scripted responses for /chat/completions and /models, recording requests."""

    def __init__(self, *responses: httpx.Response | Exception, models: list[str] | None = None):
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []
        self.models = models

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path.endswith("/models"):
            if self.models is None:
                return httpx.Response(404, json={"error": "no"})
            return httpx.Response(200, json={"data": [{"id": m} for m in self.models]})
        reply = self.responses.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.url.path.endswith("completions")]


def backend_for(server: Server, **kwargs: object) -> OpenAICompatBackend:
    options: dict[str, object] = {"base_url": "http://llm.test/v1", "model": "m"} | kwargs
    return OpenAICompatBackend(
        transport=httpx.MockTransport(server),
        **options,  # type: ignore[arg-type]
    )


async def test_request_shape_and_completion() -> None:
    server = Server(httpx.Response(200, json=ok_body()))
    backend = backend_for(server, api_key="sk-1")
    params = GenerationParams(
        temperature=0.3, max_tokens=50, seed=7, stop=("END",), json_schema=SCHEMA, schema_name="s1"
    )
    completion = await backend.complete(MESSAGES, params)
    request = server.requests[0]
    assert str(request.url) == "http://llm.test/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-1"
    assert json.loads(request.content) == {
        "model": "m",
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        "temperature": 0.3,
        "top_p": 1.0,
        "max_tokens": 50,
        "seed": 7,
        "stop": ["END"],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "s1", "schema": SCHEMA, "strict": True},
        },
    }
    assert completion.text == '{"a": 1}'
    assert (completion.prompt_tokens, completion.completion_tokens) == (11, 3)
    assert completion.model == "m" and completion.backend == "openai"
    assert completion.finish_reason == "stop" and completion.latency_s >= 0
    await backend.aclose()


async def test_plain_requests_have_no_response_format_seed_or_auth() -> None:
    server = Server(httpx.Response(200, json=ok_body("hello")))
    backend = backend_for(server)
    await backend.complete(MESSAGES, GenerationParams(seed=None))
    body = server.bodies()[0]
    assert "response_format" not in body and "seed" not in body and "stop" not in body
    assert "authorization" not in server.requests[0].headers


async def test_logprobs_are_requested_and_mapped() -> None:
    logprobs = {
        "content": [
            {"token": "{", "logprob": -0.1, "top_logprobs": [{"token": "{", "logprob": -0.1}]},
            {"token": "}", "logprob": -2.0, "top_logprobs": []},
        ]
    }
    server = Server(httpx.Response(200, json=ok_body("{}", logprobs=logprobs)))
    completion = await backend_for(server).complete(MESSAGES, GenerationParams(logprobs=3))
    body = server.bodies()[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 3
    assert completion.logprobs == (
        TokenLogprob("{", -0.1, {"{": -0.1}),
        TokenLogprob("}", -2.0, {}),
    )


@pytest.mark.parametrize(
    ("response", "error", "needle"),
    [
        (httpx.Response(503, text="overloaded, try later"), TransportError, "HTTP 503"),
        (httpx.Response(500, json={"error": "boom"}), TransportError, "boom"),
        (httpx.Response(429, text="slow down"), TransportError, "HTTP 429"),
        (httpx.Response(400, json={"error": "context too long"}), BackendRequestError, "too long"),
        (httpx.Response(404, text="no route"), BackendRequestError, "HTTP 404"),
        (httpx.Response(200, text="<html>proxy</html>"), TransportError, "malformed response"),
        (httpx.Response(200, json={"choices": []}), TransportError, "malformed response"),
        (
            httpx.Response(200, json={"choices": [{"message": {"content": 3}}]}),
            TransportError,
            "malformed",
        ),
        (httpx.ConnectError("refused"), TransportError, "cannot reach"),
        (httpx.ReadTimeout("slow"), TransportError, "timeout after"),
        (httpx.RemoteProtocolError("eof"), TransportError, "RemoteProtocolError"),
    ],
)
async def test_failures_map_onto_retryable_and_final_errors(
    response: httpx.Response | Exception, error: type[Exception], needle: str
) -> None:
    backend = backend_for(Server(response))
    with pytest.raises(error, match=needle):
        await backend.complete(MESSAGES, GenerationParams())


async def test_error_bodies_are_clipped() -> None:
    backend = backend_for(Server(httpx.Response(502, text="x" * 5000)))
    with pytest.raises(TransportError) as caught:
        await backend.complete(MESSAGES, GenerationParams())
    assert len(str(caught.value)) < 700


def _refuses_json_schema() -> httpx.Response:
    # what llama-cpp-python's server (0.3.x) answers to response_format type json_schema
    message = "1 validation error: ('body', 'response_format', 'type') Input should be 'text'"
    return httpx.Response(500, json={"error": {"message": message}})


async def test_auto_mode_falls_back_to_json_object_once_and_remembers() -> None:
    server = Server(
        _refuses_json_schema(),
        httpx.Response(200, json=ok_body()),
        httpx.Response(200, json=ok_body()),
    )
    backend = backend_for(server)
    params = GenerationParams(json_schema=SCHEMA)
    assert (await backend.complete(MESSAGES, params)).text == '{"a": 1}'
    await backend.complete(MESSAGES, params)
    formats = [b["response_format"] for b in server.bodies()]
    assert [f["type"] for f in formats] == ["json_schema", "json_object", "json_object"]
    assert formats[1] == {"type": "json_object", "schema": SCHEMA}
    assert backend.schema_mode == "json_object"


async def test_no_fallback_for_other_errors_or_a_pinned_mode() -> None:
    params = GenerationParams(json_schema=SCHEMA)
    plain_500 = Server(httpx.Response(500, text="CUDA out of memory"))
    with pytest.raises(TransportError):
        await backend_for(plain_500).complete(MESSAGES, params)
    assert len(plain_500.bodies()) == 1
    pinned = Server(_refuses_json_schema())
    with pytest.raises(TransportError, match="response_format"):
        await backend_for(pinned, schema_mode="json_schema").complete(MESSAGES, params)
    assert len(pinned.bodies()) == 1


async def test_without_a_model_name_the_first_served_model_is_used() -> None:
    server = Server(httpx.Response(200, json=ok_body()), models=["served-a", "served-b"])
    backend = backend_for(server, model=None)
    completion = await backend.complete(MESSAGES, GenerationParams())
    assert server.bodies()[0]["model"] == "served-a" and completion.model == "served-a"


async def test_without_a_model_list_requests_carry_no_model_name() -> None:
    server = Server(httpx.Response(200, json=ok_body()), httpx.Response(200, json=ok_body()))
    backend = backend_for(server, model=None)
    await backend.complete(MESSAGES, GenerationParams())
    await backend.complete(MESSAGES, GenerationParams())
    assert all("model" not in b for b in server.bodies())
    assert sum(r.url.path.endswith("/models") for r in server.requests) == 1


async def test_ready_reports_the_models_endpoint() -> None:
    assert await backend_for(Server(models=["m"])).ready() is True
    assert await backend_for(Server(models=None)).ready() is False


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens there once the socket is closed


async def test_a_closed_port_is_a_transport_error_and_not_ready() -> None:
    settings = LLMSettings(
        backend="openai", base_url=f"http://127.0.0.1:{_closed_port()}/v1", timeout_s=5
    )
    backend = OpenAICompatBackend.from_settings(settings)
    with pytest.raises(TransportError, match=r"cannot reach .*ConnectError"):
        await backend.complete(MESSAGES, GenerationParams())
    assert await backend.ready() is False
    await backend.aclose()
