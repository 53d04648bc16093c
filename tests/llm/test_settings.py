import os

import pytest
from pydantic import ValidationError

from rubricate.llm.circuit import CircuitBreakerBackend
from rubricate.llm.errors import BackendRequestError
from rubricate.llm.factory import build_backend
from rubricate.llm.judge_cache import CachingBackend
from rubricate.llm.limiter import LimitedBackend
from rubricate.llm.openai_compat import OpenAICompatBackend
from rubricate.llm.settings import LLMSettings
from rubricate.llm.vllm_backend import vllm_available


def test_defaults() -> None:
    s = LLMSettings()
    assert s.backend == "embedded" and s.embedded_model == "qwen2.5-coder-1.5b"
    assert s.model_path is None and s.base_url is None and s.api_key is None
    assert (s.n_ctx, s.n_threads, s.timeout_s) == (8192, os.cpu_count(), 300)
    assert (s.max_retries, s.backoff_base_s, s.backoff_max_s) == (5, 0.5, 20)
    assert s.enable_prefix_caching is True and s.openai_schema_mode == "auto"


def test_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUBRICATE_LLM_BACKEND", "openai")
    monkeypatch.setenv("RUBRICATE_LLM_BASE_URL", "http://vllm:8000/v1")
    monkeypatch.setenv("RUBRICATE_LLM_API_KEY", "sk-secret")
    monkeypatch.setenv("RUBRICATE_LLM_MAX_RETRIES", "2")
    monkeypatch.setenv("RUBRICATE_LLM_N_THREADS", "3")
    s = LLMSettings()
    assert (s.backend, s.base_url, s.max_retries, s.n_threads) == (
        "openai",
        "http://vllm:8000/v1",
        2,
        3,
    )
    assert s.api_key is not None and s.api_key.get_secret_value() == "sk-secret"
    assert "sk-secret" not in repr(s)


def test_openai_needs_a_base_url() -> None:
    with pytest.raises(ValidationError, match="RUBRICATE_LLM_BASE_URL"):
        LLMSettings(backend="openai")


def test_vllm_needs_a_model() -> None:
    with pytest.raises(ValidationError, match="RUBRICATE_LLM_MODEL"):
        LLMSettings(backend="vllm")


@pytest.mark.parametrize(
    "bad",
    [
        {"backend": "ollama"},
        {"embedded_model": "llama-70b"},
        {"n_ctx": 10},
        {"max_retries": -1},
        {"backoff_base_s": 5, "backoff_max_s": 1},
        {"gpu_memory_utilization": 1.5},
    ],
)
def test_invalid_values_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        LLMSettings.model_validate(bad)


async def test_factory_builds_the_openai_backend() -> None:
    backend = build_backend(
        LLMSettings(backend="openai", base_url="http://127.0.0.1:9/v1/", model="m")
    )
    # wrapped: judge cache -> circuit breaker -> call limiter -> the OpenAI-compatible backend
    assert isinstance(backend, CachingBackend)
    assert isinstance(backend.inner, CircuitBreakerBackend)
    limited = backend.inner.inner
    assert isinstance(limited, LimitedBackend)
    raw = limited.inner
    assert isinstance(raw, OpenAICompatBackend)
    assert raw.base_url == "http://127.0.0.1:9/v1" and backend.model == "m"
    # adaptive by default: starts moderate, room for a vLLM server's hundreds
    assert (limited.limiter.limit, limited.limiter.limit_state.config.ceiling) == (32, 512)
    assert raw.concurrency is None  # the limiter caps the calls, not the backend
    await backend.aclose()


@pytest.mark.skipif(vllm_available(), reason="vLLM is installed here")
def test_factory_vllm_without_vllm_says_what_to_install() -> None:
    with pytest.raises(BackendRequestError, match=r"rubricate\[gpu\]"):
        build_backend(LLMSettings(backend="vllm", model="Qwen/Qwen2.5-0.5B-Instruct"))


@pytest.mark.parametrize(
    ("kw", "bounds"),
    [
        ({"backend": "embedded"}, (1, 1, 1)),  # one llama.cpp context
        ({"backend": "openai", "base_url": "http://j/v1"}, (32, 4, 512)),
        ({"backend": "vllm", "model": "m"}, (64, 4, 512)),
        # RUBRICATE_LLM_CONCURRENCY keeps meaning a fixed limit
        ({"backend": "openai", "base_url": "http://j/v1", "concurrency": 16}, (16, 16, 16)),
        (
            {
                "backend": "openai",
                "base_url": "http://j/v1",
                "concurrency_start": 1000,
                "concurrency_min": 2,
                "concurrency_max": 300,
            },
            (300, 2, 300),  # the start is kept within floor and ceiling
        ),
    ],
)
def test_concurrency_bounds(kw: dict[str, object], bounds: tuple[int, int, int]) -> None:
    s = LLMSettings.model_validate(kw)
    assert s.concurrency_bounds() == bounds
    assert s.judge_concurrency() == bounds[0]
    assert s.http_connections() == bounds[2]  # a connection for every call that may fly


def test_concurrency_settings_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "BACKEND": "openai",
        "BASE_URL": "http://j/v1",
        "CONCURRENCY_MAX": "200",
        "CONCURRENCY_MIN": "8",
        "RPM": "600",
        "TPM": "90000",
    }.items():
        monkeypatch.setenv(f"RUBRICATE_LLM_{name}", value)
    s = LLMSettings()
    assert (s.concurrency_bounds(), s.rpm, s.tpm) == ((32, 8, 200), 600, 90000)
    with pytest.raises(ValidationError, match="concurrency_min"):
        LLMSettings(concurrency_min=10, concurrency_max=5)
