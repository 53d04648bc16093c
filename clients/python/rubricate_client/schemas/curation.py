"""Wire models of human curation: who pinned, retired or edited a rubric, and who approved,
edited or retired a bank item, and when (the rubric console and the API share them).

The author of a change is set by the server from the caller's credential (`key:<fingerprint>`
for an API key; the console adds the signed-in person's name). A caller cannot choose it."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from typing_extensions import Self

from rubricate_client.schemas.rubrics import RubricSpec

RubricAction = Literal["pin", "unpin", "retire", "edit"]
"""`pin`: never pruned; `unpin`: prunable again; `retire`: no longer scored and never
re-activated; `edit`: a new rubric (the edited text) replaces the old, which is retired."""
BankAction = Literal["approve", "retire", "edit"]
"""`approve`: a person reviewed it; `retire`: never retrieved again; `edit`: new rubrics or
takeaways, the old version kept in the item's history."""
BankStatus = Literal["pending", "approved", "retired"]

Reason = Annotated[str, StringConstraints(strip_whitespace=True, max_length=1000)]
Lesson = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]


class CurationEvent(BaseModel):
    """One change a person made."""

    target: Literal["rubric", "bank_item"]
    subject: str
    """The rubric id, or the bank item's question hash."""
    question_id: str | None = None
    """The question of a rubric (None for a bank item)."""
    action: RubricAction | BankAction
    author: str
    reason: str | None = None
    at: datetime
    detail: dict[str, Any] = Field(default_factory=dict)
    """`edit` of a rubric: `replaced_by` (the new rubric id); of a bank item: `version`."""


class CurationList(BaseModel):
    events: list[CurationEvent]
    """Newest first."""


class RubricCurationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: RubricAction
    edit: RubricSpec | None = None
    """The new text, weight and polarity: required for `edit`, refused otherwise."""
    reason: Reason | None = None

    @model_validator(mode="after")
    def _edit_only_with_edit(self) -> Self:
        if (self.action == "edit") != (self.edit is not None):
            raise ValueError("`edit` is required for action 'edit' and only for it")
        return self


class BankItemCurationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: BankAction
    rubrics: dict[str, list[Lesson]] | None = None
    """`edit`: the new reflection rubrics per category (omitted: unchanged)."""
    takeaways: list[Lesson] | None = Field(default=None, max_length=50)
    """`edit`: the new takeaways (omitted: unchanged)."""
    reason: Reason | None = None

    @model_validator(mode="after")
    def _fields_only_with_edit(self) -> Self:
        changes = self.rubrics is not None or self.takeaways is not None
        if self.action == "edit" and not changes:
            raise ValueError("action 'edit' needs `rubrics` or `takeaways`")
        if self.action != "edit" and changes:
            raise ValueError(f"action {self.action!r} takes no `rubrics` or `takeaways`")
        return self
