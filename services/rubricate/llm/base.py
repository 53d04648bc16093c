"""The `LLMBackend` interface every model server and task is written against."""

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rubricate.llm.errors import BackendRequestError

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class GenerationParams:
    temperature: float = 0.0
    max_tokens: int = 1024
    top_p: float = 1.0
    seed: int | None = 0
    json_schema: dict[str, Any] | None = None
    """When set, the backend constrains (or asks for) JSON matching this schema."""
    schema_name: str = "output"
    stop: tuple[str, ...] = ()
    logprobs: int | None = None
    """When set, ask for the top-N token log-probabilities of each generated token."""


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    model: str
    backend: str
    finish_reason: str | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True)
class ChoiceScores:
    """Log-probabilities of the first token of each choice, read in one forward pass."""

    logprobs: dict[str, float]
    prompt_tokens: int
    latency_s: float
    model: str
    backend: str


class LLMBackend(ABC):
    """A chat model. Implementations: embedded (llama.cpp), openai (HTTP), vllm (in process).

    `complete` raises `rubricate.llm.errors.TransportError` for failures worth retrying
    (connection, timeout, 5xx, 429) and `BackendRequestError` for ones that are not.
    """

    name: str
    model: str

    @abstractmethod
    async def complete(
        self, messages: Sequence[Message], params: GenerationParams
    ) -> Completion: ...

    supports_choice_scoring: bool = False
    """True when `score_choices` works (the embedded backend; an OpenAI-compatible server
    that returns log-probabilities, checked at start-up by `choice_scoring_problem`)."""
    supports_reply_prefix: bool = False
    """True when `score_choices` can continue a non-empty `reply_prefix` (embedded; a server
    that continues a final assistant message, e.g. vLLM)."""

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        """How likely the reply, after `reply_prefix`, goes on with each of `choices`.

        Reads the next-token distribution once (no sampling, no decoding loop): each
        choice gets the log-probability of its first token, so the choices must differ in
        their first token after `reply_prefix`. Raises `BackendRequestError` where the
        backend cannot do this (`supports_choice_scoring` is False).
        """
        raise BackendRequestError(f"the {self.name} backend cannot score choices")

    async def choice_scoring_problem(self) -> str | None:
        """None when `score_choices` works on this backend, else why not (one line).

        Called once at start-up by the model servers; a backend whose capability is known
        without asking (embedded) answers from `supports_choice_scoring`."""
        if self.supports_choice_scoring:
            return None
        return f"the {self.name} backend cannot score choices"

    async def ready(self) -> bool:
        """True when the backend can take requests now."""
        return True

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release resources (HTTP pools, model memory)."""


class WrappingBackend(LLMBackend):
    """A backend that wraps another (the judge cache, the circuit breaker, the limiter): it
    takes the wrapped one's names and capabilities, and passes on what it does not change."""

    def __init__(self, inner: LLMBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.supports_choice_scoring = inner.supports_choice_scoring
        self.supports_reply_prefix = inner.supports_reply_prefix

    def __getattr__(self, name: str) -> Any:
        """Capabilities of the wrapped backend (e.g. logprob support) stay visible."""
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def choice_scoring_problem(self) -> str | None:
        return await self.inner.choice_scoring_problem()

    async def ready(self) -> bool:
        return await self.inner.ready()

    async def aclose(self) -> None:
        await self.inner.aclose()
