"""Content words of a text: lower-cased, crudely stemmed, stop words out. The one word
model of the judges' lexical checks (nugget overlap and grounding, assertion units and
the evidence rule)."""

import re
from typing import Final

_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_SUFFIXES: Final = ("ing", "edly", "ed", "ly", "es", "s")

_STOP = """a an the and or but if of to in on at by for with from as into about over under
than then that this these those it its is are was were be been being has have had do
does did not no can could may might will would should shall must also such which who
whom whose what when where why how there their they them he she his her we our you your
i me my more most other some any each all both few many much very so only own same too
just via per"""
STOP_WORDS: Final = frozenset(_STOP.split())


def stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    words = _WORD.findall(text.lower().replace("’", "'"))
    return {stem(w.split("'")[0]) for w in words if w not in STOP_WORDS}
