"""LLM backend settings (env prefix `RUBRICATE_LLM_`), shared by the two model servers."""

import os
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

BackendKind = Literal["embedded", "openai", "vllm"]
EmbeddedModel = Literal["qwen2.5-coder-1.5b", "smollm2-135m"]
SchemaMode = Literal["auto", "json_schema", "json_object"]


def _cpu_count() -> int:
    return os.cpu_count() or 1


class LLMSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RUBRICATE_LLM_", extra="ignore")

    backend: BackendKind = "embedded"
    base_url: str | None = None
    """OpenAI-compatible base URL including `/v1`, e.g. `http://vllm:8000/v1`."""
    model: str | None = None
    """Model name sent to the OpenAI-compatible server; the model vLLM loads in process."""
    api_key: SecretStr | None = None

    # embedded (llama.cpp)
    embedded_model: EmbeddedModel = "qwen2.5-coder-1.5b"
    model_path: Path | None = None
    """Any GGUF file; wins over `embedded_model`."""
    n_ctx: int = Field(default=8192, ge=256)
    n_threads: int = Field(default_factory=_cpu_count, ge=1)
    embedded_logprobs: bool = False
    """Keep logits of every position so calls may ask for logprobs (costs n_ctx × vocab
    floats of memory: about 5 GB for Qwen2.5 at 8k context)."""
    prompt_cache_mb: int = Field(default=0, ge=0)
    """RAM for llama.cpp saved states (prompt prefix reuse across alternating prompts)."""

    # openai-compatible HTTP
    timeout_s: float = Field(default=300.0, gt=0)
    openai_schema_mode: SchemaMode = "auto"
    """How a JSON schema is sent: `json_schema` (OpenAI, vLLM), `json_object` with a
    `schema` (llama.cpp's server), or `auto` (the first, falling back once to the second)."""
    max_connections: int | None = Field(default=None, ge=1)
    """HTTP connections to the server; unset: as many as judge calls may be in flight (the
    fixed limit, or the adaptive limit's ceiling)."""
    choice_top_logprobs: int = Field(default=20, ge=2, le=20)
    """Alternatives read at the reply's first token when a served backend scores choices
    (the OpenAI API's `top_logprobs`; 20 is its maximum and vLLM's default limit)."""
    openai_continue_final_message: bool = False
    """The server continues a final assistant message when asked with
    `continue_final_message` (vLLM does; llama-cpp-python's server does not): needed for
    choice scoring after a reply prefix (the nugget verifier's `["`)."""

    # how many judge calls a backend takes at once (`llm.limiter`)
    concurrency: int | None = Field(default=None, ge=1)
    """A fixed limit of judge calls in flight per backend, shared by every request of the
    model server; unset, the limit adapts to the server between `concurrency_min` and
    `concurrency_max` (1 on the embedded backend, which runs one call at a time anyway). Set 1
    for a server that decodes one sequence at a time (llama-cpp-python's), so a rollout's
    calls stay consecutive and reuse its cached prefix; set the slot count for llama.cpp's
    `llama-server -np N`."""
    concurrency_start: int | None = Field(default=None, ge=1)
    """Where the adaptive limit starts (unset: 32 on `openai`, 64 on `vllm`, within the
    floor and the ceiling)."""
    concurrency_min: int = Field(default=4, ge=1)
    """The adaptive limit's floor: backing off never goes below it."""
    concurrency_max: int = Field(default=512, ge=1)
    """The adaptive limit's ceiling: growing never goes above it."""
    concurrency_latency_rise: float = Field(default=2.0, gt=1.0)
    """Recent latency this many times the long-run latency of the same kind of call counts
    as the server queueing: the adaptive limit backs off (by a tenth)."""
    rpm: int | None = Field(default=None, ge=1)
    """Requests per minute the server allows (a hosted API's budget): at most this many
    judge calls start in any 60 s. Unset: no budget."""
    tpm: int | None = Field(default=None, ge=1)
    """Tokens per minute the server allows: a call is counted at its estimate (prompt
    characters / 3 plus `max_tokens`) when it starts and at its reported tokens once it
    answers; calls wait while the last 60 s would go over. Unset: no budget."""
    background_share: float = Field(default=0.25, gt=0.0, le=1.0)
    """The most of the limit that background judge work (the audit's reference judge on the
    live model) holds at once (at least one call); it runs only when no live call waits."""
    prefix_cache: Literal["shared", "per_slot"] = "shared"
    """Where the server caches prompt prefixes, which decides how a request's judge passes
    are sent (`llm.request_gate`): `shared`, one cache for all sequences (vLLM, SGLang,
    hosted APIs): a request's first pass alone, then the rest at once; `per_slot`, one cache
    per parallel slot (llama.cpp's `llama-server -np N`, with `concurrency` = N): a request's
    passes back to back on one slot, N requests at once."""

    # retries (RubricEM App. C.4: up to 5)
    max_retries: int = Field(default=5, ge=0)
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=20.0, ge=0)

    # resilience: judge-call cache and circuit breaker (wrap every backend)
    cache: Literal["off", "memory", "redis"] = "memory"
    """Cache temperature-0 calls: in process (`memory`), shared (`redis`), or `off`."""
    cache_url: str | None = None
    """Redis URL for `cache=redis`."""
    cache_ttl_s: int = Field(default=7 * 24 * 3600, ge=1)
    cache_max_entries: int = Field(default=4096, ge=1)
    """Size of the in-process LRU (`cache=memory`)."""
    circuit_failures: int = Field(default=5, ge=1)
    """Transport failures in a row that open the backend's circuit."""
    circuit_cooldown_s: float = Field(default=30.0, gt=0)
    """How long an open circuit fails fast before one trial call."""

    # vLLM in process
    gpu_memory_utilization: float = Field(default=0.85, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=256)
    enable_prefix_caching: bool = True
    tensor_parallel_size: int = Field(default=1, ge=1)

    def judge_concurrency(self) -> int:
        """The judge calls in flight at first: the fixed `concurrency`, 1 on the embedded
        backend, else where the adaptive limit starts."""
        return self.concurrency_bounds()[0]

    def concurrency_bounds(self) -> tuple[int, int, int]:
        """(start, floor, ceiling) of the judge-call limit; all three equal when it is fixed
        (`concurrency` set, or the embedded backend)."""
        if self.concurrency is not None:
            return self.concurrency, self.concurrency, self.concurrency
        if self.backend == "embedded":
            return 1, 1, 1
        start = self.concurrency_start
        if start is None:
            start = {"openai": 32, "vllm": 64}[self.backend]
        start = min(max(start, self.concurrency_min), self.concurrency_max)
        return start, self.concurrency_min, self.concurrency_max

    def http_connections(self) -> int:
        """`max_connections`, or one per judge call that may be in flight."""
        if self.max_connections is not None:
            return self.max_connections
        return self.concurrency_bounds()[2]

    @model_validator(mode="after")
    def _check_backend(self) -> Self:
        if self.backend == "openai" and not self.base_url:
            raise ValueError(
                "backend 'openai' needs a base URL: set RUBRICATE_LLM_BASE_URL, "
                "e.g. http://vllm:8000/v1"
            )
        if self.backend == "vllm" and not self.model:
            raise ValueError(
                "backend 'vllm' needs a model to load: set RUBRICATE_LLM_MODEL, "
                "e.g. Qwen/Qwen2.5-7B-Instruct"
            )
        if self.cache == "redis" and not self.cache_url:
            raise ValueError("RUBRICATE_LLM_CACHE=redis needs RUBRICATE_LLM_CACHE_URL")
        if self.concurrency_min > self.concurrency_max:
            raise ValueError("concurrency_min must be <= concurrency_max")
        if self.backoff_max_s < self.backoff_base_s:
            raise ValueError("backoff_max_s must be >= backoff_base_s")
        return self
