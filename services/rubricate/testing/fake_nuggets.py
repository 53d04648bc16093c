"""A fake nugget labeller for FakeJudgeBackend(handlers=...): judges nothing, decides labels
by word overlap so tests know the answer in advance."""

import itertools
import re
from collections.abc import Iterator

from rubricate.llm.base import GenerationParams
from rubricate.llm.errors import TransportError
from rubricate.nuggets.prompts.formats import FORMATS, LabelFormat, render

_BLOCK = re.compile(r"(?:Passage[^:\n]*|Predicted answer):\n<untrusted>(.*?)</untrusted>", re.S)
_ITEM = re.compile(r"^(\d+)\. (.*)$", re.M)
_WORD = re.compile(r"[a-z0-9]{3,}")


def parse_prompt(user: str) -> tuple[str, list[str], bool]:
    """(block text, nuggets, binary) from a nugget-label prompt."""
    match = _BLOCK.search(user)
    assert match is not None, user
    block = match.group(1)
    tail = user[match.end() :]
    listing = tail.split("to label:\n", 1)[1].split("\n\n", 1)[0]
    nuggets = [m.group(2) for m in _ITEM.finditer(listing)]
    return block, nuggets, "Predicted answer:" in user


def overlap_label(block: str, nugget: str, *, binary: bool) -> str:
    words = set(_WORD.findall(nugget.lower()))
    present = words & set(_WORD.findall(block.lower()))
    if words and present == words:
        return "support"
    if present and not binary:
        return "partial_support"
    return "not_support"


class FakeNuggetLabeller:
    """Handler for the `nugget_labels` schema name.

    `formats`: reply formats, used in turn (default: all ten). `short_replies`: how many of
    the first calls reply with one label too few. `fail_marker`: a block containing it
    makes the call raise a transport error.
    """

    def __init__(
        self,
        *,
        formats: tuple[LabelFormat, ...] = FORMATS,
        short_replies: int = 0,
        fail_marker: str = "[[verifier-down]]",
    ) -> None:
        self._formats: Iterator[LabelFormat] = itertools.cycle(formats)
        self.short_replies = short_replies
        self.fail_marker = fail_marker
        self.prompts: list[str] = []

    def __call__(self, user: str, params: GenerationParams) -> str:
        self.prompts.append(user)
        if user.startswith("Your reply could not be used"):
            block, nuggets, binary = self._original_prompt_for_repair()
        else:
            block, nuggets, binary = parse_prompt(user)
        if self.fail_marker in block:
            raise TransportError("fake labeller: configured to fail")
        labels = [overlap_label(block, n, binary=binary) for n in nuggets]
        if self.short_replies > 0:
            self.short_replies -= 1
            labels = labels[:-1]
        return render(labels, next(self._formats))

    def _original_prompt_for_repair(self) -> tuple[str, list[str], bool]:
        for prompt in reversed(self.prompts):
            if not prompt.startswith("Your reply could not be used"):
                return parse_prompt(prompt)
        raise AssertionError("a repair without a first call")
