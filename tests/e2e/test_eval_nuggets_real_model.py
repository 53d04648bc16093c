"""`rubricate eval nuggets` end to end on the real embedded model (slow): two real records
of the RAG24 dev set (TREC RAG 2024 topics; GPT-4o answers and reference labels from
NamaWho/pyterrier-nuggetizer, Apache-2.0), answers shortened to a few of their
sentences, two nuggets each with their reference labels."""

import json
from pathlib import Path

import pytest

from rubricate.cli import main

pytestmark = pytest.mark.model

RECORDS = [
    {
        "topic_id": "2024-109837",
        "question": "is pew research trustworthy",
        "answer": (
            "Pew Research Center is widely regarded as a trustworthy source of information. "
            "Established in 2004, Pew Research Center is a nonprofit, nonpartisan research "
            "organization that conducts public opinion surveys on a wide range of issues."
        ),
        "nuggets": [
            {"text": "Established in 2004", "importance": "vital", "label": "support"},
            {
                "text": "Funded by The Pew Charitable Trusts",
                "importance": "vital",
                "label": "not_support",
            },
        ],
    },
    {
        "topic_id": "2024-43037",
        "question": "how europe solved its russian gas problem",
        "answer": (
            "Europe has not fully solved its Russian gas problem, but it has taken several "
            "steps to mitigate its dependence on Russian gas and enhance its energy security. "
            "One of the primary strategies has been to diversify energy sources and "
            "transportation routes."
        ),
        "nuggets": [
            {"text": "EU dependency on Russian gas", "importance": "vital", "label": "support"},
            {"text": "Putin uses pipeline politics", "importance": "vital", "label": "not_support"},
        ],
    },
]


def test_eval_nuggets_on_the_embedded_model(tmp_path: Path) -> None:
    data = tmp_path / "two.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    out = tmp_path / "report.json"
    assert main(["eval", "nuggets", "--data", str(data), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["pairs"] == report["pairs_judged"] == 4
    assert report["failed_records"] == []
    assert report["calls"] == 4  # the embedded default: one nugget per call
    assert report["seconds_per_nugget"] > 0 and report["tokens_per_nugget"] > 100
    assert sum(map(sum, report["confusion"]["matrix"])) == 4
    assert report["config"]["backend"] == "embedded"
    assert 0.0 <= report["accuracy"] <= 1.0
