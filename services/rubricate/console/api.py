"""The console reads and writes only through the gateway's public API, in process.

Each call goes through the whole gateway app (`RouteInvoker.http`): authentication, tenant
limits, validation and the one error shape apply as to any client. The console presents the
internal service credential with the signed-in tenant and actor, which the gateway trusts
from a service only; so what the console shows and changes is exactly what the public API
shows and changes for that tenant, and every change records its author.
"""

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rubricate.common.auth import ACTOR_HEADER, AuthSettings, actor_header_value
from rubricate.common.dispatch import RouteInvoker
from rubricate_client.endpoints import Endpoint
from rubricate_client.headers import TENANT_HEADER
from rubricate_client.schemas.errors import ErrorResponse

RespT = TypeVar("RespT", bound=BaseModel)


class ApiFailure(Exception):
    """The API refused or failed a console call; `message` comes from its error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class ConsoleApi:
    def __init__(
        self, invoker: RouteInvoker, auth: AuthSettings, *, tenant: str, actor: str
    ) -> None:
        self.invoker = invoker
        self.headers = {TENANT_HEADER: tenant, ACTOR_HEADER: actor_header_value(actor)}
        if auth.internal_token is not None:
            self.headers["Authorization"] = f"Bearer {auth.internal_token.get_secret_value()}"

    async def call(
        self,
        endpoint: Endpoint[Any, RespT],
        *,
        params: Mapping[str, str | int | None] | None = None,
        body: BaseModel | None = None,
    ) -> RespT:
        values = {k: str(v) for k, v in (params or {}).items() if v is not None and v != ""}
        response = await self.invoker.http(
            endpoint.method,
            endpoint.url_path(values),
            json_body=None if body is None else body.model_dump(mode="json", exclude_none=True),
            headers=self.headers,
        )
        if response.status >= 400:
            raise ApiFailure(response.status, _message(response.body))
        try:
            return endpoint.response.model_validate_json(response.body)
        except ValidationError as exc:
            raise ApiFailure(502, f"unexpected answer from {endpoint.path}: {exc}") from exc


def _message(body: bytes) -> str:
    """The message of the one error shape, else the raw text."""
    try:
        return ErrorResponse.model_validate_json(body).error.message
    except ValidationError:
        return body.decode("utf-8", "replace")[:500]
