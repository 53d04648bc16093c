"""Question normalization and the question id (sha256 of the normalized question)."""

import hashlib
import re
import unicodedata

_WS = re.compile(r"\s+")


def normalize_question(question: str) -> str:
    """NFKC, case-folded, whitespace collapsed, stripped."""
    text = unicodedata.normalize("NFKC", question).casefold()
    return _WS.sub(" ", text).strip()


def question_hash(question: str) -> str:
    """Hex sha256 of the normalized question: the default question id."""
    return hashlib.sha256(normalize_question(question).encode("utf-8")).hexdigest()
