"""What every model-server task service shares: one family of judge tasks (stage scores,
nugget labels, step verdicts, ...) on the server's one backend, registered as an equal of
the others (`llm.server.create_model_server_app(services={name: Service.factory})`).

A service holds the backend, the task and LLM settings and the retry policy its judge calls
take (`llm.calls`, `**self.retry`), and answers with what every task response carries
besides its result (`served`: usage, model, backend).
"""

from typing import NotRequired, Self, TypedDict

from rubricate.common.usage import Usage, usage_out
from rubricate.llm.base import LLMBackend
from rubricate.llm.retry import RetryArgs, retry_args
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate_client.schemas.common import UsageOut


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

    @classmethod
    def factory(cls, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings) -> Self:
        """The service as a model server builds it (a `llm.server.ServiceFactory`)."""
        return cls(backend=backend, tasks=tasks, llm=llm)

    def served(self, usage: Usage) -> Served:
        """`usage` on the wire and the backend that did the work."""
        return Served(usage=usage_out(usage), model=self.backend.model, backend=self.backend.name)
