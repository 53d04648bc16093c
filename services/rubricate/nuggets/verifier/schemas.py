"""Wire models of the verifier's nugget-label task (`POST /v1/tasks/nugget-labels`)."""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from rubricate.common.schemas import TaskResponse
from rubricate_client.schemas.nuggets import MAX_BATCH_SIZE, Label, NuggetMode, NuggetText


class NuggetLabelsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    blocks: list[Annotated[str, StringConstraints(min_length=1)]] = Field(min_length=1)
    """The answer's blocks (paragraphs); in short mode the one predicted answer."""
    nuggets: list[NuggetText] = Field(min_length=1)
    mode: NuggetMode = "long"
    batch_size: int | None = Field(default=None, ge=1, le=MAX_BATCH_SIZE)
    """Nuggets per model call; each block is judged against every batch. Default: the
    verifier's `RUBRICATE_NUGGET_TASK_BATCH_SIZE`, else 1 on the embedded backend and 10
    on served ones."""
    label_probabilities: bool = False
    """Ask the backend for token log-probabilities and return p(label) per pair."""


class BlockLabels(BaseModel):
    labels: list[Label]
    """One label per nugget, in nugget order."""
    probabilities: list[dict[Label, float] | None] | None = None
    """p(label) per nugget when requested and the backend returned log-probabilities;
    an entry is null where the label's token could not be located."""


class NuggetLabelsResponse(TaskResponse):
    batch_size: int
    """Nuggets per call as used."""
    blocks: list[BlockLabels]
    """One entry per request block, in order."""
    repairs: int = 0
    """Calls whose reply had to be repaired (wrong label count or unreadable)."""
    formats: list[str] = Field(default_factory=list)
    """The label formats the replies were read as, one per call, block-major (`choices`
    for calls of the choice-scoring design)."""
    design: Literal["generate", "choices"] = "generate"
    """`generate`: the model writes the labels; `choices`: one forward pass per (block,
    nugget) reads p(label) at the label's first token (backends that can, e.g. embedded)."""
    calibration: str | None = None
    """The model name of the label calibration applied (choices design, long mode), or null
    when labels are the model's most probable ones."""
    judge_addressing: list[list[str]] = Field(default_factory=list)
    """Per request block, what in it addresses the judge (`llm.prompt_text`
    `addressing_by_part`: prompt tags, control tokens, label sheets, demands, claims that
    everything is verified, ...); empty for ordinary blocks. A flagged block was WITHHELD
    from the model: every nugget is `not_support` in it (probability 1 when requested)."""
