import json
from pathlib import Path

import pytest

from rubricate.mining.domain.passages import pack_sentences, split_sentences
from rubricate.mining.miner.loaders import (
    format_of,
    html_to_text,
    load_path,
    markdown_to_text,
    parse_document,
    rst_to_text,
)
from rubricate.mining.miner.runner import passages_of
from rubricate_client.errors import DomainError


def test_html_keeps_prose_and_drops_navigation_scripts_and_code() -> None:
    raw = """<html><head><title>json — JSON encoder</title><style>p{}</style></head><body>
    <div class="related" role="navigation"><a href="x">next</a> <div>nested nav</div></div>
    <div class="body"><h1>json<a class="headerlink" href="#">¶</a></h1>
    <p>The json module encodes &amp; decodes JSON.</p><pre>json.dumps({})</pre>
    <ul><li>First item.</li><li>Second<br>item.</li></ul><script>alert(1)</script></div>
    <div class="sphinxsidebar"><p>search box</p></div></body></html>"""
    title, text = html_to_text(raw)
    assert title == "json — JSON encoder"
    assert text.split("\n\n") == [
        "json",
        "The json module encodes & decodes JSON.",
        "First item.",
        "Second",
        "item.",
    ]


def test_markdown_and_rst_become_prose() -> None:
    md = (
        "# Title\n\nSome *emphasis* and a [link](http://x).\n\n```python\ncode()\n```\n\n- item one"
    )
    assert markdown_to_text(md) == "Title\n\nSome emphasis and a link.\n\nitem one"
    rst = (
        ":mod:`json` --- JSON\n====================\n\n.. module:: json\n   :synopsis: x\n\n"
        "Use :func:`dumps` to encode ``obj``. Example::\n\n   json.dumps(1)\n\nDone."
    )
    assert rst_to_text(rst) == "json --- JSON\n\nUse dumps to encode obj. Example:\n\nDone."


def test_jsonl_gives_one_document_per_line_and_names_the_bad_line() -> None:
    content = "\n".join(
        [json.dumps({"id": "a", "text": "First doc."}), "", json.dumps({"contents": "Second."})]
    )
    docs = parse_document(doc_id="f.jsonl", content=content, fmt="jsonl", field="documents[0]")
    assert [(d.id, d.text) for d in docs] == [("f.jsonl/a", "First doc."), ("f.jsonl/3", "Second.")]
    with pytest.raises(DomainError) as err:
        parse_document(doc_id="f", content='{"id": 1}\nnot json', fmt="jsonl", field="documents[2]")
    assert err.value.field == "documents[2]"
    assert "line 1" in err.value.message


def test_formats_by_suffix() -> None:
    assert format_of(Path("a/json.rst.txt")) == "rst"
    assert format_of(Path("notes.TXT")) == "text"
    assert format_of(Path("page.htm")) == "html"
    assert format_of(Path("image.png")) is None


def test_real_python_docs_segment_into_passages_of_five_to_ten_sentences(
    small_corpus: Path,
) -> None:
    docs = list(load_path(small_corpus))
    assert sorted(d.id for d in docs) == [
        "library/csv.html",
        "library/json.html",
        "library/pathlib.html",
    ]
    json_doc = next(d for d in docs if d.id == "library/json.html")
    assert json_doc.title is not None and "json" in json_doc.title
    assert "JSON (JavaScript Object Notation)" in json_doc.text
    assert "Navigation" not in json_doc.text and "¶" not in json_doc.text
    passages = [p for d in docs for p in passages_of(d)]
    assert len(passages) > 60
    for doc in docs:
        groups = pack_sentences(split_sentences(doc.text))
        assert all(5 <= len(g) <= 10 for g in groups)
        assert [p.text for p in passages_of(doc)] == [" ".join(g) for g in groups]
    assert passages[0].passage_id == f"{passages[0].doc_id}#0"
