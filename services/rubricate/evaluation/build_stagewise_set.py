"""Builds the stagewise sensitivity set from real RAG24 answers.

    python -m rubricate.evaluation.build_stagewise_set \\
        --data ../shared/data/rag24-nuggets-dev.jsonl \\
        --out services/rubricate/examples/stagewise_eval.jsonl

Each record of the RAG24 file (TREC RAG 2024 topic, GPT-4o answer, nuggets with reference
labels; see ../shared/data/README.md) becomes one Plan/Research/Review/Answer trajectory:
- answer: the record's own answer, sentence by sentence, verbatim; each sentence cites the
  tool output that holds it;
- research: one search per block of `SENTENCES_PER_SOURCE` consecutive answer sentences;
  the query is the vital nugget closest to the block (else the question), the output is
  the block itself (the answer's own sentences);
- plan and review: fixed templates that list those queries and sources;
- vital facts: each vital nugget labelled `support`, with the answer sentence sharing the
  most content words with it (overlap at least `MIN_OVERLAP`).
No text is written for the set: every content sentence comes from the record.
Records with at least `MIN_VITAL` vital facts and `MIN_SENTENCES` sentences are kept,
shortest answers first (the embedded model is slow on long prompts).
"""

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from rubricate.evaluation.degrade import (
    Case,
    Sentence,
    ToolCall,
    VitalFact,
    best_sentence,
    split_sentences,
)
from rubricate.evaluation.stagewise import case_to_json

SENTENCES_PER_SOURCE: Final = 3
MIN_OVERLAP: Final = 0.5
MIN_VITAL: Final = 2
MIN_SENTENCES: Final = 4
DEFAULT_RECORDS: Final = 12


def build_case(record: dict[str, Any]) -> Case:
    question = str(record["question"])
    sentences = split_sentences(str(record["answer"]))
    if not sentences:
        raise ValueError(f"topic {record.get('topic_id')}: empty answer")
    vital: list[VitalFact] = []
    taken: set[int] = set()
    for nugget in record["nuggets"]:
        if nugget.get("importance") != "vital" or nugget.get("label") != "support":
            continue
        index, score = best_sentence(str(nugget["text"]), sentences)
        if score >= MIN_OVERLAP and index not in taken:
            taken.add(index)
            vital.append(VitalFact(nugget=str(nugget["text"]), sentence=index))
    blocks = [
        sentences[i : i + SENTENCES_PER_SOURCE]
        for i in range(0, len(sentences), SENTENCES_PER_SOURCE)
    ]
    queries: list[str] = []
    used: set[str] = set()
    for block in blocks:
        text = " ".join(block)
        candidates = [
            (best_sentence(v.nugget, [text])[1], v.nugget) for v in vital if v.nugget not in used
        ]
        score, nugget = max(candidates, default=(0.0, ""), key=lambda c: c[0])
        query = nugget if score > 0 else question
        used.add(query)
        queries.append(query)
    research = tuple(
        ToolCall(query=q, output=" ".join(b)) for q, b in zip(queries, blocks, strict=True)
    )
    answer = tuple(
        Sentence(s, cites=(i // SENTENCES_PER_SOURCE + 1,)) for i, s in enumerate(sentences)
    )
    steps = "\n".join(f"{k}) search: {q}" for k, q in enumerate(queries, start=1))
    plan = (
        f"<think>Question: {question}</think>\n"
        f"<structured_plan><research_plan>{steps}</research_plan></structured_plan>"
    )
    found = "\n".join(f"[{k}] {q}" for k, q in enumerate(queries, start=1))
    review = (
        f"<think>{len(research)} sources found.</think>\n"
        f"<review><rubric_review>{found}</rubric_review>"
        f"<writing_plan>Answer from sources [1] to [{len(research)}] in order, citing each."
        f"</writing_plan></review>"
    )
    return Case(
        topic_id=str(record["topic_id"]),
        question=question,
        plan=plan,
        research=research,
        review=review,
        answer=answer,
        vital=tuple(vital),
    )


def build_set(records: Sequence[dict[str, Any]], *, n: int = DEFAULT_RECORDS) -> list[Case]:
    cases = [build_case(r) for r in records]
    kept = [c for c in cases if len(c.vital) >= MIN_VITAL and len(c.answer) >= MIN_SENTENCES]
    kept.sort(key=lambda c: (sum(len(s.text) for s in c.answer), c.topic_id))
    return kept[:n]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="RAG24 nugget JSONL file")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, default=DEFAULT_RECORDS, help="records to keep")
    args = parser.parse_args(argv)
    with args.data.open(encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    cases = build_set(records, n=args.n)
    args.out.write_text(
        "".join(json.dumps(case_to_json(c), ensure_ascii=False) + "\n" for c in cases),
        encoding="utf-8",
    )
    print(f"{len(cases)} trajectories from {len(records)} records written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
