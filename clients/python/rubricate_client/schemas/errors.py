"""The one error shape of every HTTP route (and of gRPC's error details).

{"error": {"type": "...", "message": "...", "field": "rollouts[1].trajectory" | null,
           "details": [{"field": ..., "message": ...}], "request_id": "..."}}
"""

from pydantic import BaseModel

from rubricate_client.schemas.common import UsageOut


class ErrorDetail(BaseModel):
    field: str | None = None
    message: str


class ErrorBody(BaseModel):
    type: str
    message: str
    field: str | None = None
    details: list[ErrorDetail] = []
    request_id: str | None = None
    usage: UsageOut | None = None
    """LLM work spent before the failure, for errors raised by model servers."""


class ErrorResponse(BaseModel):
    error: ErrorBody
