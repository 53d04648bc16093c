"""Schemathesis against the gateway's OpenAPI schema: no generated request gets a 500.

The platform runs embedded with a fake judge that answers every task with the smallest valid
instance of its output schema, so requests that pass validation reach real orchestration, the
store and the miner. The fake's answers are often not usable verdicts (a ranking listing one
candidate twice): the typed 502 that follows is the platform refusing a bad judge, as it
should. What fails the test is an unhandled error anywhere in the chain: a 500, an
`internal_error` passed on by an upstream, or a 5xx outside the shared error shape.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.fake import minimal_instance
from rubricate.llm.settings import LLMSettings
from rubricate.testing.fake_judge import FakeJudgeBackend


class FuzzJudge(FakeJudgeBackend):
    """A fake: the stagewise answers of FakeJudgeBackend; any other task gets the minimal
    instance of its output schema. It judges nothing."""

    async def complete(self, messages, params):  # type: ignore[no-untyped-def]
        if params.schema_name not in ("stage_rubrics", "score_sheet") and params.json_schema:
            schema = params.json_schema
            self.handlers[params.schema_name] = lambda _u, _p: json.dumps(minimal_instance(schema))
        return await super().complete(messages, params)


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPlatform]:
    import asyncio
    import threading

    data_dir: Path = tmp_path_factory.mktemp("fuzz")
    p = EmbeddedPlatform(
        data_dir=data_dir,
        ports=dict.fromkeys(SERVICES, 0),
        llm=LLMSettings(max_retries=0, backoff_base_s=0.001, backoff_max_s=0.002),
        backend=FuzzJudge(),
        gateway=GatewaySettings(upstream_retries=0, grpc_enabled=False, max_body_bytes=200_000),
    )
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop: dict[str, Any] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)

        async def main() -> None:
            stop["event"] = asyncio.Event()
            async with p:
                started.set()
                await stop["event"].wait()

        loop.run_until_complete(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(120), "the embedded platform did not start"
    yield p
    loop.call_soon_threadsafe(stop["event"].set)
    thread.join(60)


def test_no_server_errors(platform: EmbeddedPlatform) -> None:
    base = platform.urls["gateway"]
    api = schemathesis.openapi.from_url(f"{base}/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in api.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=12,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: Any) -> None:
            response = case.call(base_url=base, timeout=60)
            if response.status_code < 500:
                return
            where = f"{case.method} {case.formatted_path}: {response.status_code}"
            try:
                error = response.json()["error"]
            except (ValueError, KeyError, TypeError):
                failures.append(f"{where} outside the error shape: {response.text[:200]}")
                return
            # a typed judge/upstream failure is allowed; an unhandled error anywhere is not
            if response.status_code == 500 or error["type"] == "internal_error":
                failures.append(f"{where} {error['type']}: {error['message'][:300]}")

        check()
    assert operations >= 10, "the gateway schema lists too few operations"
    assert not failures, "\n".join(sorted(set(failures)))


# --- issue 17: every internal service's API, with the same fake judge behind the model servers

ALLOWED_5XX = frozenset({502, 503})
INTERNAL = ("store", "verifier", "rubric-generator", "miner")


def off_contract(response: Any) -> str | None:
    """Why a response breaks the contract: a status outside 2xx/4xx/502/503, an error body
    off the one error shape, or an unhandled error passed on."""
    status = response.status_code
    if status < 400:
        return None if status < 300 else f"unexpected status {status}"
    try:
        error = response.json()["error"]
        assert isinstance(error["type"], str) and isinstance(error["message"], str)
        assert "request_id" in error and "field" in error
    except (ValueError, KeyError, TypeError, AssertionError):
        return f"{status} outside the error shape: {response.text[:200]}"
    if status >= 500 and status not in ALLOWED_5XX:
        return f"{status} {error['type']}: {error['message'][:300]}"
    if error["type"] == "internal_error":
        return f"{status} internal_error passed on: {error['message'][:300]}"
    return None


@pytest.mark.parametrize("service", INTERNAL)
def test_internal_services_keep_the_contract(platform: EmbeddedPlatform, service: str) -> None:
    base = platform.urls[service]
    api = schemathesis.openapi.from_url(f"{base}/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in api.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=10,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: Any) -> None:
            response = case.call(base_url=base, timeout=60)
            problem = off_contract(response)
            if problem is not None:
                failures.append(f"{case.method} {case.formatted_path}: {problem}")

        check()
    assert operations >= 3, f"the {service} schema lists too few operations"
    assert not failures, "\n".join(sorted(set(failures)))
