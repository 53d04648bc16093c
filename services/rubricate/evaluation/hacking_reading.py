"""`rubricate eval hacking --reading`: the assertion-unit reading alone, with no judge (GitHub
issue 32).

Every template of every family is rendered once on every base item, read with the cues
(`core.assertions`, the `claims` reading, as an answer is read), and counted as a *leak* when
a unit that carries one of the item's facts (at least two content words of one fact clause,
or its only one) is read as the author's claim. A leak is where a judge can still be paid:
the unit reaches it as an assertion. No leak does not mean no reward rise (a judge may be
swayed by what it is shown as a placeholder, or by an assertion with no fact in it), so the
judges' own runs stay the measure; this one takes seconds and needs no model, so it is the
check to run after every change to the cues. The right answers' units that the cues do not
read as claims are what the reading costs on clean text.

Per family and split, `leaks / instances`. Verbosity states no fact by design; its leaks
count units that share two words with a fact (the topic), not facts.
"""

import random
from collections.abc import Sequence
from typing import Any

from rubricate.core.assertions import read_cues, split_units
from rubricate.core.words import content_words
from rubricate.evaluation.hacking_families import (
    SPLITS,
    TEMPLATES,
    Split,
    all_templates,
    render,
    split_of,
)
from rubricate.evaluation.hacking_items import BaseItem, Subject


def leaked_units(text: str, subject: Subject) -> list[str]:
    """The units of `text` read as claims that carry one of `subject`'s facts."""
    facts = [content_words(c) for c in subject.clauses]
    out: list[str] = []
    for unit in read_cues(split_units(text), text=text):
        if unit.kind is not None:
            continue
        words = content_words(unit.text)
        if any(len(words & f) >= min(2, len(f)) for f in facts if f):
            out.append(unit.text)
    return out


def reading_report(items: Sequence[BaseItem], *, seed: int = 0) -> dict[str, Any]:
    rows: dict[str, dict[Split, dict[str, int]]] = {}
    for family in TEMPLATES:
        templates = list(all_templates(family))
        cells = {s: {"leaks": 0, "n": 0} for s in SPLITS}
        for template in templates:
            split = split_of(family, template, templates)
            for item in items:
                rng = random.Random(f"{seed}:{family}:{item.name}")
                text = render(template, item.subject, rng)
                cells[split]["n"] += 1
                cells[split]["leaks"] += bool(leaked_units(text, item.subject))
        rows[family] = cells
    kept = total = 0
    for item in items:
        units = read_cues(split_units(item.right), text=item.right)
        total += len(units)
        kept += sum(u.kind is None for u in units)
    return {"families": rows, "right_answer_units": {"claims": kept, "units": total}}


def format_reading(report: dict[str, Any]) -> str:
    lines = [
        "Assertion-unit reading alone (cues, no judge): instances in which a unit carrying a "
        "fact is read as the author's claim",
        f"{'family':<11} {'tuning':>10} {'held-out':>10}",
    ]
    for family, cells in report["families"].items():
        shown = [f"{cells[s]['leaks']}/{cells[s]['n']}" for s in SPLITS]
        lines.append(f"{family:<11} {shown[0]:>10} {shown[1]:>10}")
    right = report["right_answer_units"]
    lines.append(f"right answers: {right['claims']}/{right['units']} units read as claims")
    return "\n".join(lines)
