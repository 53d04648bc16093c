"""Stagewise trajectories and the worse versions derived from them (pure, deterministic).

A `Case` is a Plan/Research/Review/Answer trajectory kept in parts, so that one kind of
damage can change exactly one thing: the answer is a list of sentences, each with the
numbers of the tool outputs it cites. `render` writes the trajectory in the markup the
stage parser reads (RubricEM App. C.3; citations as ``<cite id="k">[k]</cite>``).

Kinds of damage (each returns a new case; nothing else changes):
- `vital_fact_removed`: the answer sentence that carries one vital nugget is dropped;
- `wrong_fact_inserted`: a real sentence from another topic's answer is inserted into the
  answer, citing the same source as the sentence before it (a cited claim the sources do
  not support);
- `citations_stripped`: every citation of the answer is removed;
- `answer_truncated`: the answer stops mid-sentence after half of its words;
- `stage_deleted`: the plan, research or review stage is removed.
"""

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from rubricate.nuggets.domain.lexical import overlap

Kind = Literal[
    "vital_fact_removed",
    "wrong_fact_inserted",
    "citations_stripped",
    "answer_truncated",
    "stage_deleted",
]
KINDS: Final[tuple[Kind, ...]] = (
    "vital_fact_removed",
    "wrong_fact_inserted",
    "citations_stripped",
    "answer_truncated",
    "stage_deleted",
)
DeletableStage = Literal["plan", "research", "review"]
DELETABLE_STAGES: Final[tuple[DeletableStage, ...]] = ("plan", "research", "review")
TRUNCATE_FRACTION: Final = 0.5
"""`answer_truncated` keeps this fraction of the answer's words."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_TRAILING_PUNCT = re.compile(r"\s*([.!?]+[\"')\]]*)\s*$")


@dataclass(frozen=True)
class Sentence:
    text: str
    cites: tuple[int, ...] = ()


@dataclass(frozen=True)
class ToolCall:
    query: str
    output: str


@dataclass(frozen=True)
class VitalFact:
    nugget: str
    sentence: int
    """Index of the answer sentence that carries the nugget."""


@dataclass(frozen=True)
class Case:
    topic_id: str
    question: str
    plan: str | None
    research: tuple[ToolCall, ...] | None
    review: str | None
    answer: tuple[Sentence, ...]
    vital: tuple[VitalFact, ...] = ()


@dataclass(frozen=True)
class Variant:
    kind: Kind
    case: Case
    detail: str
    """What was changed, for the report (the nugget removed, the stage deleted, ...)."""


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, split after . ! ? before a capital or digit; text kept verbatim."""
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text.strip())) if s]


def best_sentence(nugget: str, sentences: Sequence[str]) -> tuple[int, float]:
    """Index and overlap of the sentence sharing the most content words with `nugget`
    (the first one on ties)."""
    if not sentences:
        raise ValueError("no sentences")
    scores = [overlap(nugget, s) for s in sentences]
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return best, scores[best]


def render_sentence(sentence: Sentence) -> str:
    """The sentence with its citations before the closing punctuation."""
    if not sentence.cites:
        return sentence.text
    marks = "".join(f'<cite id="{k}">[{k}]</cite>' for k in sentence.cites)
    match = _TRAILING_PUNCT.search(sentence.text)
    if match is None:
        return f"{sentence.text} {marks}"
    return f"{sentence.text[: match.start()]} {marks}{match.group(1)}"


def answer_text(case: Case) -> str:
    return " ".join(render_sentence(s) for s in case.answer)


def render(case: Case) -> str:
    """The trajectory string sent to `/v1/stagewise/score`."""
    parts: list[str] = []
    if case.plan is not None:
        parts.append(case.plan)
    if case.research is not None:
        for k, call in enumerate(case.research, start=1):
            parts.append(
                f'<call_tool name="search">{call.query}</call_tool>\n'
                f"<tool_output>[{k}] {call.output}</tool_output>"
            )
    if case.review is not None:
        parts.append(case.review)
    parts.append(f"<answer>{answer_text(case)}</answer>")
    return "\n".join(parts)


def remove_vital_fact(case: Case, *, index: int) -> Variant:
    """Drop the answer sentence carrying `case.vital[index]`."""
    fact = case.vital[index]
    answer = tuple(s for i, s in enumerate(case.answer) if i != fact.sentence)
    vital = tuple(v for v in case.vital if v.sentence != fact.sentence)
    return Variant(
        "vital_fact_removed",
        replace(case, answer=answer, vital=_shift(vital, removed=fact.sentence)),
        detail=f"removed sentence {fact.sentence} (vital nugget: {fact.nugget})",
    )


def _shift(vital: Sequence[VitalFact], *, removed: int) -> tuple[VitalFact, ...]:
    return tuple(replace(v, sentence=v.sentence - (v.sentence > removed)) for v in vital)


def insert_wrong_fact(case: Case, *, fact: str, source_topic: str, position: int) -> Variant:
    """Insert `fact` (a real sentence of another topic) after answer sentence `position - 1`,
    citing what that sentence cites."""
    if not 1 <= position <= len(case.answer):
        raise ValueError(f"position {position} outside 1..{len(case.answer)}")
    cites = case.answer[position - 1].cites
    answer = (*case.answer[:position], Sentence(fact, cites), *case.answer[position:])
    vital = tuple(replace(v, sentence=v.sentence + (v.sentence >= position)) for v in case.vital)
    return Variant(
        "wrong_fact_inserted",
        replace(case, answer=answer, vital=vital),
        detail=f"inserted at {position} a sentence from topic {source_topic}: {fact}",
    )


def strip_citations(case: Case) -> Variant:
    answer = tuple(Sentence(s.text) for s in case.answer)
    return Variant("citations_stripped", replace(case, answer=answer), detail="all citations")


def truncate_answer(case: Case, *, fraction: float = TRUNCATE_FRACTION) -> Variant:
    """Keep the first `fraction` of the answer's words; the cut sentence loses its end and
    its citations (they came after the cut)."""
    words = [len(s.text.split()) for s in case.answer]
    target = max(1, int(sum(words) * fraction))
    keep = target
    out: list[Sentence] = []
    whole = 0
    for sentence, n in zip(case.answer, words, strict=True):
        if keep >= n:
            out.append(sentence)
            whole += 1
            keep -= n
            if keep == 0:
                break
            continue
        if keep > 0:
            out.append(Sentence(" ".join(sentence.text.split()[:keep])))
        break
    vital = tuple(v for v in case.vital if v.sentence < whole)
    return Variant(
        "answer_truncated",
        replace(case, answer=tuple(out), vital=vital),
        detail=f"kept {target} of {sum(words)} words",
    )


def delete_stage(case: Case, *, stage: DeletableStage) -> Variant:
    changed = {
        "plan": replace(case, plan=None),
        "research": replace(case, research=None),
        "review": replace(case, review=None),
    }[stage]
    return Variant("stage_deleted", changed, detail=stage)


def derive(
    case: Case,
    *,
    others: Sequence[Case],
    seed: int,
    kinds: Sequence[Kind] = KINDS,
) -> list[Variant]:
    """The degraded versions of `case`, one per kind, choices drawn from `seed` and the
    topic (the same inputs give the same versions). A kind that does not apply (no vital
    fact, a one-sentence answer, no other topic to take a fact from) is left out."""
    rng = random.Random(f"{seed}:{case.topic_id}")
    out: list[Variant] = []
    for kind in kinds:
        if kind == "vital_fact_removed":
            if case.vital and len(case.answer) > 1:
                out.append(remove_vital_fact(case, index=rng.randrange(len(case.vital))))
        elif kind == "wrong_fact_inserted":
            donors = [o for o in others if o.topic_id != case.topic_id and o.vital]
            if donors:
                donor = donors[rng.randrange(len(donors))]
                fact = donor.vital[rng.randrange(len(donor.vital))]
                text = donor.answer[fact.sentence].text
                position = rng.randint(1, len(case.answer))
                out.append(
                    insert_wrong_fact(
                        case, fact=text, source_topic=donor.topic_id, position=position
                    )
                )
        elif kind == "citations_stripped":
            if any(s.cites for s in case.answer):
                out.append(strip_citations(case))
        elif kind == "answer_truncated":
            if sum(len(s.text.split()) for s in case.answer) > 1:
                out.append(truncate_answer(case))
        elif kind == "stage_deleted":
            present = [s for s in DELETABLE_STAGES if getattr(case, s) is not None]
            if present:
                out.append(delete_stage(case, stage=present[rng.randrange(len(present))]))
    return out
