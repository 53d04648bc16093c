"""The backend `RUBRICATE_LLM_BACKEND` selects; heavy imports happen only for the one chosen."""

from rubricate.llm.base import LLMBackend
from rubricate.llm.settings import LLMSettings


def build_backend(settings: LLMSettings) -> LLMBackend:
    """Build (and, for the in-process backends, load) the configured backend. Blocking."""
    if settings.backend == "openai":
        from rubricate.llm.openai_compat import OpenAICompatBackend

        return OpenAICompatBackend.from_settings(settings)
    if settings.backend == "vllm":
        from rubricate.llm.vllm_backend import VLLMBackend

        return VLLMBackend.from_settings(settings)
    from rubricate.llm.embedded import EmbeddedBackend

    return EmbeddedBackend.from_settings(settings)
