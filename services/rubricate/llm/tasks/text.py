"""Rendering untrusted text into prompts: delimited, escaped, and clipped to a budget."""

import re

_TAG = re.compile(r"</?\s*(untrusted|trajectory|stage|answer_text|rubrics)\b[^>]*>", re.I)


def escape_untrusted(text: str) -> str:
    """Neutralize tags that would close or forge the prompt's own delimiters."""
    return _TAG.sub(lambda m: m.group(0).replace("<", "‹").replace(">", "›"), text)


def clip(text: str, *, max_chars: int) -> str:
    """Keep head and tail of an over-long text, with a visible marker in between."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[-tail:]}"
