"""A fake judge for the six nugget-mining tasks: handlers for `FakeJudgeBackend`.

For tests of the mining pipeline's orchestration and for measuring its overhead only; it
understands nothing. Deterministic word rules stand in for judgment:
- rewrites: the query plus one frequent passage word it lacks, per new query;
- duplicate check: duplicate when the word sets overlap by Jaccard ≥ 0.9;
- temporal check: a query naming a year (1900–2099) is satisfied only by passages naming it;
- extraction: passage sentences of 10–20 words sharing a word with the question;
- merging: nuggets whose word sets overlap by Jaccard ≥ 0.6 merge into the longest;
- importance: vital when the nugget shares two or more words with the question.
"""

import json
import re
from collections import Counter
from collections.abc import Mapping

from rubricate.llm.base import GenerationParams
from rubricate.mining.domain.passages import split_sentences
from rubricate.testing.handler import Handler

_BLOCK = re.compile(
    r"(?P<label>[A-Za-z ]+?)(?: \(\d+\))?:\n<untrusted>\n?(?P<body>.*?)\n?</untrusted>", re.S
)
_WORD = re.compile(r"[a-z][a-z0-9_]+")
_YEAR = re.compile(r"\b(19|20)\d\d\b")
_STOP_WORDS = (
    "the a an and or of to in on for with by is are was were be been it its this that these "
    "those as at from what how why which who when where does do did can could should would "
    "about into than then there their they them not no yes use used using"
)
_STOP = frozenset(_STOP_WORDS.split())


def _blocks(prompt: str) -> dict[str, str]:
    return {m.group("label").strip().lower(): m.group("body") for m in _BLOCK.finditer(prompt)}


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _max_from(prompt: str, default: int) -> int:
    found = re.search(r"at most (\d+)", prompt)
    return int(found.group(1)) if found else default


def _rewrites(prompt: str, _: GenerationParams) -> str:
    blocks = _blocks(prompt)
    query = blocks.get("query to rewrite", "")
    passage = blocks.get("passage", "")
    have = _words(query)
    counts = Counter(w for w in _WORD.findall(passage.lower()) if w not in _STOP and len(w) > 3)
    fresh = [w for w, _ in counts.most_common() if w not in have]
    n = _max_from(prompt.split("Return JSON", 1)[-1], 3)
    queries = [
        {"operations": ["constraint_modification"], "query": f"{query} {word}"}
        for word in fresh[:n]
    ]
    return json.dumps({"queries": queries})


def _duplicate(prompt: str, _: GenerationParams) -> str:
    blocks = _blocks(prompt)
    new = _words(blocks.get("new query", ""))
    listing = prompt.split("Existing queries:", 1)[-1]
    for line in listing.splitlines():
        found = re.match(r"(\d+)\. (.*)", line.strip())
        if found and _jaccard(new, _words(found.group(2))) >= 0.9:
            return json.dumps({"similar_to": int(found.group(1)), "duplicate": True})
    return json.dumps({"similar_to": None, "duplicate": False})


def _temporal(prompt: str, _: GenerationParams) -> str:
    blocks = _blocks(prompt)
    years = {m.group(0) for m in _YEAR.finditer(blocks.get("query", ""))}
    if not years:
        return json.dumps({"constraint": "none", "satisfied": True})
    passage = blocks.get("passage", "")
    return json.dumps({"constraint": "strict", "satisfied": any(y in passage for y in years)})


def _extract(prompt: str, _: GenerationParams) -> str:
    blocks = _blocks(prompt)
    question = _words(blocks.get("question", ""))
    n = _max_from(prompt.split("Return JSON", 1)[-1], 5)
    nuggets = [
        s
        for s in split_sentences(blocks.get("passage", ""))
        if 10 <= len(s.split()) <= 20 and _words(s) & question and not s.lower().startswith("it ")
    ]
    return json.dumps({"nuggets": nuggets[:n]})


def _numbered(prompt: str, heading: str) -> list[str]:
    listing = prompt.split(heading, 1)[-1].split("</untrusted>", 1)[0]
    return [m.group(2) for m in re.finditer(r"^(\d+)\. (.*)$", listing, re.M)]


def _merge(prompt: str, _: GenerationParams) -> str:
    nuggets = _numbered(prompt, "Nuggets:")
    words = [_words(n) for n in nuggets]
    used: set[int] = set()
    groups = []
    for i in range(len(nuggets)):
        if i in used:
            continue
        ids = [
            j
            for j in range(i, len(nuggets))
            if j not in used and _jaccard(words[i], words[j]) >= 0.6
        ]
        if len(ids) >= 2:
            used.update(ids)
            best = max((nuggets[j] for j in ids), key=len)
            groups.append({"ids": [j + 1 for j in ids], "nugget": best})
    return json.dumps({"groups": groups})


def _importance(prompt: str, _: GenerationParams) -> str:
    question = _words(_blocks(prompt).get("question", ""))
    heading = re.search(r"Nuggets \(\d+\):", prompt)
    nuggets = _numbered(prompt, heading.group(0) if heading else "Nuggets")
    labels = ["vital" if len(_words(n) & question) >= 2 else "okay" for n in nuggets]
    return json.dumps({"labels": labels})


def fake_mining_handlers() -> Mapping[str, Handler]:
    """Handlers for `FakeJudgeBackend(handlers=...)`, keyed by the tasks' schema names."""
    return {
        "query_rewrites": _rewrites,
        "query_duplicate": _duplicate,
        "temporal_check": _temporal,
        "nugget_extraction": _extract,
        "nugget_merge": _merge,
        "nugget_importance": _importance,
    }
