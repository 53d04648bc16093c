"""What every model-server task returns besides its result (internal task contracts)."""

from pydantic import BaseModel

from rubricate_client.schemas.common import UsageOut


class TaskResponse(BaseModel):
    """What every model-server task returns besides its result."""

    usage: UsageOut
    model: str
    backend: str
