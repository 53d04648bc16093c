"""What every model-server task service shares: one family of judge tasks (stage scores,
nugget labels, step verdicts, ...) on the server's one backend, registered as an equal of
the others (`llm.server.create_model_server_app(services={name: Service.factory})`).

A service holds the backend, the task and LLM settings and the retry policy its judge calls
take (`llm.calls`, `**self.retry`), makes its structured judge calls on that backend with
that policy (`structured`, decoded as its kind of task is: `decoding`), reads the material
it judges as assertion units (`units`, the one pass every judge goes through), and answers with
what every task response carries besides its result (`served`: usage, model, backend).
"""

from collections.abc import Callable, Sequence
from typing import Any, Literal, NotRequired, Self, TypedDict, TypeVar

from pydantic import BaseModel

from rubricate.common.usage import Usage, usage_out
from rubricate.llm.assertions import UnitReader
from rubricate.llm.base import GenerationParams, LLMBackend, Message
from rubricate.llm.calls import complete_structured
from rubricate.llm.retry import RetryArgs, retry_args
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate_client.schemas.common import UsageOut

T = TypeVar("T", bound=BaseModel)


class Served(TypedDict):
    """The fields of `common.schemas.TaskResponse`: splat into a task's response."""

    usage: UsageOut
    model: str
    backend: str


class TaskServiceArgs(TypedDict):
    """What `TaskService.__init__` takes: a service with settings of its own takes these and
    passes them on (`**common: Unpack[TaskServiceArgs]`)."""

    backend: LLMBackend
    llm: LLMSettings
    tasks: NotRequired[TaskSettings | None]


class TaskService:
    def __init__(
        self, *, backend: LLMBackend, llm: LLMSettings, tasks: TaskSettings | None = None
    ) -> None:
        self.backend = backend
        self.llm = llm
        self.tasks = tasks or TaskSettings()
        self.retry: RetryArgs = retry_args(llm)
        self.units = UnitReader(
            backend,
            mode=self.tasks.unit_reading,
            retry=self.retry,
            params=lambda name, schema: self.decoding("scoring", name, json_schema=schema),
            prefix_cache=llm.prefix_cache,
        )
        """Reads answers as assertion units before any judge sees them (`llm.assertions`)."""

    @classmethod
    def factory(cls, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings) -> Self:
        """The service as a model server builds it (a `llm.server.ServiceFactory`)."""
        return cls(backend=backend, tasks=tasks, llm=llm)

    def served(self, usage: Usage) -> Served:
        """`usage` on the wire and the backend that did the work."""
        return Served(usage=usage_out(usage), model=self.backend.model, backend=self.backend.name)

    def decoding(
        self,
        kind: Literal["generation", "scoring"],
        schema_name: str,
        *,
        max_tokens: int | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> GenerationParams:
        """Decoding for a `kind` task (`TaskSettings`: its temperature, and its token budget
        unless `max_tokens`), its output schema named `schema_name`."""
        if kind == "generation":
            temperature, budget = (
                self.tasks.generation_temperature,
                self.tasks.generation_max_tokens,
            )
        else:
            temperature, budget = self.tasks.scoring_temperature, self.tasks.scoring_max_tokens
        return GenerationParams(
            temperature=temperature,
            max_tokens=budget if max_tokens is None else max_tokens,
            json_schema=json_schema,
            schema_name=schema_name,
        )

    async def structured(
        self,
        task: str,
        messages: Sequence[Message],
        output: type[T],
        params: GenerationParams,
        usage: Usage,
        *,
        validate: Callable[[T], None] | None = None,
        stage: str = "all",
    ) -> T:
        """One structured judge call for `task` (`llm.calls.complete_structured`: `output`
        validated, with one repair call) on this service's backend and retry policy, its
        tokens and latency recorded in `usage`."""
        return await complete_structured(
            self.backend,
            messages,
            output=output,
            params=params,
            usage=usage,
            task=task,
            validate=validate,
            stage=stage,
            **self.retry,
        )
