"""The backend `RUBRICATE_LLM_BACKEND` selects; heavy imports happen only for the one chosen.

Every built backend is wrapped: the call limiter in front of the model (`llm.limiter`: how
many calls are in flight, per-minute budgets, live before background work), a circuit
breaker in front of that, and (unless `RUBRICATE_LLM_CACHE=off`) a cache of deterministic
calls in front of both, so a cache hit takes no place and an open circuit fails fast
without queueing.
"""

from rubricate.llm.base import LLMBackend
from rubricate.llm.circuit import CircuitBreakerBackend
from rubricate.llm.judge_cache import CachingBackend, MemoryCompletionCache, RedisCompletionCache
from rubricate.llm.limiter import Judge, JudgeLimiter, LimitedBackend
from rubricate.llm.request_gate import requests_at_once
from rubricate.llm.settings import LLMSettings


def build_backend(settings: LLMSettings, *, judge: Judge = "live") -> LLMBackend:
    """Build (and, for the in-process backends, load) the configured backend. Blocking.
    `judge` labels its limiter's metrics (`reference`: the audit's own backend)."""
    return wrap_backend(_build_raw(settings), settings, judge=judge)


def wrap_backend(inner: LLMBackend, settings: LLMSettings, *, judge: Judge = "live") -> LLMBackend:
    limiter = JudgeLimiter.from_settings(
        settings,
        backend=inner.name,
        judge=judge,
        per_request=requests_at_once(settings, inner.name) is not None,
    )
    backend: LLMBackend = CircuitBreakerBackend(
        LimitedBackend(inner, limiter),
        failure_threshold=settings.circuit_failures,
        cooldown_s=settings.circuit_cooldown_s,
    )
    if settings.cache == "memory":
        backend = CachingBackend(
            backend, MemoryCompletionCache(max_entries=settings.cache_max_entries)
        )
    elif settings.cache == "redis":
        assert settings.cache_url is not None  # the settings validator guarantees it
        backend = CachingBackend(
            backend, RedisCompletionCache(settings.cache_url, ttl_s=settings.cache_ttl_s)
        )
    return backend


def _build_raw(settings: LLMSettings) -> LLMBackend:
    if settings.backend == "openai":
        from rubricate.llm.openai_compat import OpenAICompatBackend

        return OpenAICompatBackend.from_settings(settings)
    if settings.backend == "vllm":
        from rubricate.llm.vllm_backend import VLLMBackend

        return VLLMBackend.from_settings(settings)
    from rubricate.llm.embedded import EmbeddedBackend

    return EmbeddedBackend.from_settings(settings)
