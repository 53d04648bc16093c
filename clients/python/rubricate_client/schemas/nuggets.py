"""Public wire models of nugget verification (`/v1/nuggets/verify`, `/v1/nuggets/verify-batch`)."""

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from rubricate_client.schemas.common import UsageOut

Label = Literal["support", "partial_support", "not_support"]
Importance = Literal["vital", "okay"]
NuggetMode = Literal["long", "short"]
NuggetText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]

# Search-Gen-V App. B.4 / App. C: the verifier sees 1–10 nuggets per call; Rubricate's bound.
MAX_BATCH_SIZE: Final = 50

DecidedBy = Literal["model", "exact_match", "empty_answer"]


class NuggetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: NuggetText
    """One atomic fact a good answer states (short mode: the ground-truth answer)."""
    importance: Importance = "vital"
    """`vital` (weight 1) or `okay` (weight 0.5)."""


class NuggetVerifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=20_000)
    answer: str = Field(max_length=400_000)
    """The answer to verify. An empty answer supports no nugget (reward 0, no model call)."""
    nuggets: list[NuggetIn] = Field(min_length=1)
    mode: NuggetMode = "long"
    """`long`: blocks = paragraphs, ternary labels. `short`: one ground-truth nugget,
    binary labels, exact match first."""
    batch_size: int | None = Field(default=None, ge=1, le=MAX_BATCH_SIZE)
    """Nuggets per verifier call. Default: `RUBRICATE_NUGGETS_BATCH_SIZE` if set, else the
    verifier's default for its backend (1 on the embedded CPU model, 10 on served models).
    1 = one call per (block, nugget) with the block as the cached prompt prefix."""
    exact_match: bool = True
    """Short mode: a normalized exact match decides `support` without a model call."""
    label_probabilities: bool = False
    """Return p(label) per nugget and the expected (soft) reward, where the backend gives
    token log-probabilities."""


class NuggetResult(BaseModel):
    index: int
    text: str
    importance: Importance
    weight: float
    label: Label
    value: float
    """1 / 0.5 / 0 for support / partial_support / not_support."""
    block: int | None
    """The block that decided the label (the first with the best label); null when no
    block supports the nugget or no block was judged."""
    decided_by: DecidedBy
    probabilities: dict[Label, float] | None = None
    """p(label) from the deciding block (max-pooled by expected value), when requested."""
    expected_value: float | None = None
    """Σ p(label)·value, when probabilities are available."""


class BlockOut(BaseModel):
    index: int
    start: int
    end: int
    """[start, end) character offsets of the block in the answer."""
    labels: list[Label]
    """The block's label for each nugget, in nugget order (after the grounding check: a
    block supports a nugget only where it carries the nugget's content)."""
    judge_addressing: list[str] = Field(default_factory=list)
    """What in the block addresses the judge (prompt tags, control tokens, a sheet of
    labels, a demand to label it supported, a claim that everything is verified, ...).
    Non-empty: the block was withheld from the judge and supports no nugget."""


class JudgeInfo(BaseModel):
    model: str
    backend: str
    repairs: int
    """Verifier calls whose reply had to be repaired."""
    lexical_prior: str | None = None
    """The word-overlap correction applied to the model's labels (`off` when none)."""
    design: str = "generate"
    """How the verifier labelled: `generate` (the model wrote labels) or `choices` (label
    probabilities from one forward pass per pair)."""
    calibration: str | None = None
    """The model whose fitted label calibration decided the labels (choices design, long
    mode), or null."""


class NuggetVerifyResponse(BaseModel):
    reward: float
    """Σ w·v / Σ w over the nuggets' max-pooled labels (Search-Gen-V Eq. 3)."""
    soft_reward: float | None = None
    """Σ w·E[v] / Σ w from label probabilities; null unless requested and available for
    every nugget the model judged."""
    mode: NuggetMode
    batch_size: int | None
    """Nuggets per verifier call as used; null when no model call was needed."""
    nuggets: list[NuggetResult]
    blocks: list[BlockOut]
    judge: JudgeInfo | None = None
    """Null when no model call was needed."""
    usage: UsageOut
    total_s: float
    judge_addressing: bool = False
    """True when some block addressed the judge and was withheld (see
    `blocks[i].judge_addressing`)."""


class NuggetVerifyBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[NuggetVerifyRequest] = Field(min_length=1)
    concurrency: int | None = Field(default=None, ge=1, le=256)
    """Items verified at once (default and ceiling: `RUBRICATE_NUGGETS_BATCH_CONCURRENCY`)."""


class ItemError(BaseModel):
    type: str
    message: str
    field: str | None = None
    status: int
    """The HTTP status the single-item endpoint would have answered."""


class BatchItemResult(BaseModel):
    index: int
    result: NuggetVerifyResponse | None = None
    error: ItemError | None = None
    """Set instead of `result` when the item failed: its reward is unknown, not 0."""


class NuggetVerifyBatchResponse(BaseModel):
    rewards: list[float | None]
    """Per item in request order; null for a failed item (see `items[i].error`)."""
    items: list[BatchItemResult]
    succeeded: int
    failed: int
    usage: UsageOut
    """All LLM work, failed items included."""
    total_s: float
