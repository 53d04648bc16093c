"""The agent rubric bank's policy (RubricEM §3.4, App. D.5, D.6.3): which reflection a
question keeps, which items retrieval may return (human curation: issue 19), what a person's
edit may hold, and the `<reference_examples>` blocks that inject retrieved items into the
policy's prompt. Storage and vector search live in the store service."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from rubricate.reflections.domain.reflection import CATEGORIES
from rubricate_client.errors import DomainError
from rubricate_client.schemas.bank import DEFAULT_RETRIEVE_K as DEFAULT_RETRIEVE_K
from rubricate_client.schemas.bank import MAX_RETRIEVE_K as MAX_RETRIEVE_K
from rubricate_client.schemas.bank import RetrievalMode
from rubricate_client.schemas.curation import BankAction, BankStatus

# RubricEM App. D.6.3: the two preambles (our wording). Within-episode signals direct
# self-improvement; cross-episode signals analogical transfer without copying.
WITHIN_PREAMBLE: Final = (
    "You have worked on this very question before. The rubrics and lessons below come from "
    "your earlier attempt: use them to plan and answer better this time, fixing what went "
    "wrong and keeping what worked."
)
CROSS_PREAMBLE: Final = (
    "The rubrics and lessons below were distilled from earlier attempts at related "
    "questions. Treat them as a reference for planning and answering: take what applies to "
    "this question, adapt it to what this question needs, and do not copy it word for word."
)
OPEN_TAG: Final = "<reference_examples>"
CLOSE_TAG: Final = "</reference_examples>"


@dataclass(frozen=True)
class BankEntry:
    """What retrieval needs of a bank item."""

    question: str
    rubrics: Mapping[str, Sequence[str]]
    """Category -> guidance lines (core.reflection.CATEGORIES order when rendered)."""
    takeaways: Sequence[str]


def replaces(*, new_step: int | None, stored_step: int | None) -> bool:
    """Whether an accepted reflection replaces the stored one (App. D.5: the newer wins).

    Newer is decided by training step when both carry one (an equal step is a later write
    of the same step, so it replaces); without steps, by arrival. A reflection from an
    older step never replaces one from a newer step (e.g. a late asynchronous job).
    """
    if new_step is None or stored_step is None:
        return True
    return new_step >= stored_step


def accepts_reflections(status: BankStatus) -> bool:
    """Whether a question's item takes newer reflections: not once a person retired it (a
    retired question's reflections never enter the bank again)."""
    return status != "retired"


def retrievable(status: BankStatus, *, require_approval: bool) -> bool:
    """Whether retrieval may return an item: never a retired one; with `require_approval`,
    only one a person approved."""
    if status == "retired":
        return False
    return status == "approved" or not require_approval


def curation_conflict(status: BankStatus, action: BankAction) -> str | None:
    """Why `action` cannot apply to an item of `status` (None: it can). Retirement is final:
    a retired item is neither approved, edited nor retired again."""
    if status != "retired":
        return None
    verb = {"approve": "approved", "edit": "edited", "retire": "retired again"}[action]
    return f"the bank item is retired and cannot be {verb}"


def check_edit(
    rubrics: Mapping[str, Sequence[str]] | None, takeaways: Sequence[str] | None
) -> None:
    """A person's edit keeps an item usable: rubrics in the four categories (App. D.6.1),
    each with a line, and at least one takeaway. Raises DomainError."""
    if rubrics is not None:
        if not rubrics:
            raise DomainError("rubrics: give at least one category", field="rubrics")
        for category, lines in rubrics.items():
            if category not in CATEGORIES:
                raise DomainError(
                    f"rubrics: unknown category {category!r} (one of {', '.join(CATEGORIES)})",
                    field=f"rubrics.{category}",
                )
            if not lines:
                raise DomainError(
                    f"rubrics: category {category!r} has no lines", field=f"rubrics.{category}"
                )
    if takeaways is not None and not takeaways:
        raise DomainError("takeaways: give at least one", field="takeaways")


def render_rubrics(rubrics: Mapping[str, Sequence[str]]) -> str:
    order = [c for c in CATEGORIES if c in rubrics] + [c for c in rubrics if c not in CATEGORIES]
    parts = []
    for category in order:
        parts.append(f"{category}:")
        parts.extend(f"- {line}" for line in rubrics[category])
    return "\n".join(parts)


def render_takeaways(takeaways: Sequence[str]) -> str:
    return "\n".join(f"{n}. {t}" for n, t in enumerate(takeaways, start=1))


def _item_body(entry: BankEntry) -> list[str]:
    return [
        "### Rubrics:",
        render_rubrics(entry.rubrics),
        "",
        "### Takeaways:",
        render_takeaways(entry.takeaways),
    ]


def render_block(mode: RetrievalMode, entries: Sequence[BankEntry]) -> str:
    """The `<reference_examples>` block for `mode`, or "" when nothing was retrieved.

    Within-episode: the question's own previous reflection (only the first entry is used).
    Cross-episode: every entry, numbered, each with its question, separated by `---`.
    """
    if not entries:
        return ""
    lines = [OPEN_TAG]
    if mode == "within":
        lines += [WITHIN_PREAMBLE, "", "## Your Previous Attempt on This Question:", ""]
        lines += _item_body(entries[0])
    else:
        lines += [CROSS_PREAMBLE, ""]
        for n, entry in enumerate(entries, start=1):
            if n > 1:
                lines += ["", "---", ""]
            lines += [f"## Similar Question {n}:", entry.question.strip(), ""]
            lines += _item_body(entry)
    lines.append(CLOSE_TAG)
    return "\n".join(lines)


def inject(block: str, question: str) -> str:
    """The user message with the block placed before the question (App. D.6.3)."""
    return f"{block}\n\n{question}" if block else question
