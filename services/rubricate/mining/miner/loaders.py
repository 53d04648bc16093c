"""Document loaders: text, Markdown, reStructuredText, HTML and JSONL into plain text.

`parse_document` works on content already in memory (an upload); `load_path` walks a file
or a directory. Markup is reduced to prose: code blocks, navigation and scripts are dropped,
because nuggets are statements of fact and passages are counted in sentences.
"""

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Final

from rubricate_client.errors import DomainError
from rubricate_client.schemas.mining import DocFormat

SUFFIXES: Final[dict[str, DocFormat]] = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".rst.txt": "rst",
    ".html": "html",
    ".htm": "html",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    title: str | None = None


def format_of(path: Path) -> DocFormat | None:
    name = path.name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return SUFFIXES[suffix]
    return None


# --- HTML ---------------------------------------------------------------------------------

_SKIP_TAGS: Final = frozenset(
    {"script", "style", "head", "nav", "footer", "header", "pre", "noscript", "svg", "form"}
)
_SKIP_CLASSES: Final = frozenset(
    {"sphinxsidebar", "related", "footer", "headerlink", "navigation", "toctree-wrapper"}
)
_BLOCK_TAGS: Final = frozenset(
    {
        "p", "div", "section", "article", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr",
        "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "main", "aside",
    }
)  # fmt: skip
_VOID: Final = frozenset({"br", "hr", "img", "meta", "link", "input", "wbr", "source", "area"})


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self._skip_tag: str | None = None
        self._skip_depth = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
            return
        if self._skip_tag is not None:
            if tag == self._skip_tag and tag not in _VOID:
                self._skip_depth += 1
            return
        values = dict(attrs)
        classes = set((values.get("class") or "").split())
        if (
            tag in _SKIP_TAGS
            or classes & _SKIP_CLASSES
            or values.get("role") == "navigation"
            or values.get("aria-hidden") == "true"
        ) and tag not in _VOID:
            self._skip_tag, self._skip_depth = tag, 1
            return
        if tag in _BLOCK_TAGS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if self._skip_tag is not None:
            if tag == self._skip_tag:
                self._skip_depth -= 1
                if self._skip_depth == 0:
                    self._skip_tag = None
            return
        if tag in _BLOCK_TAGS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
        elif self._skip_tag is None:
            self.parts.append(data)


def html_to_text(raw: str) -> tuple[str | None, str]:
    """(title, text) of an HTML page; blocks become paragraphs."""
    parser = _TextExtractor()
    parser.feed(raw)
    parser.close()
    title = " ".join("".join(parser.title_parts).split()) or None
    return title, _paragraphs("".join(parser.parts))


# --- Markdown and reST --------------------------------------------------------------------

_FENCE: Final = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_MD_IMAGE: Final = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_MD_LINK: Final = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_MD_PREFIX: Final = re.compile(r"^[ \t]*(#{1,6}[ \t]+|>[ \t]?|[-*+][ \t]+|\d+[.)][ \t]+)", re.M)
_MD_EMPHASIS: Final = re.compile(r"(\*\*|__|\*|_|`)(\S(?:.*?\S)?)\1")
_HTML_TAG: Final = re.compile(r"<[^>\n]+>")
_RST_ROLE: Final = re.compile(r":[\w:+-]+:`([^`<]*?)(?:\s*<[^>]*>)?`")
_RST_LITERAL: Final = re.compile(r"``([^`]+)``")
_RST_LINK: Final = re.compile(r"`([^`<]+?)\s*(?:<[^>]*>)?`_{1,2}")
_RST_DIRECTIVE: Final = re.compile(r"^\.\. .*$(\n[ \t]+.*$|\n[ \t]*$)*", re.M)
_RST_UNDERLINE: Final = re.compile(r"^[=\-~^\"'`#*+:.]{3,}[ \t]*$", re.M)
_RST_LITERAL_BLOCK: Final = re.compile(r"::[ \t]*\n[ \t]*\n((?:[ \t]+.*\n|[ \t]*\n)+)", re.M)


def markdown_to_text(raw: str) -> str:
    text = _FENCE.sub("\n", raw)
    text = _MD_IMAGE.sub("", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _MD_PREFIX.sub("", text)
    text = _MD_EMPHASIS.sub(r"\2", text)
    text = _HTML_TAG.sub("", text)
    return _paragraphs(text)


def rst_to_text(raw: str) -> str:
    text = _RST_LITERAL_BLOCK.sub(":\n\n", raw)
    text = _RST_DIRECTIVE.sub("", text)
    text = _RST_UNDERLINE.sub("", text)
    text = _RST_ROLE.sub(r"\1", text)
    text = _RST_LITERAL.sub(r"\1", text)
    text = _RST_LINK.sub(r"\1", text)
    return _paragraphs(text)


def _paragraphs(text: str) -> str:
    blocks = [" ".join(block.split()) for block in re.split(r"\n[ \t]*\n", text)]
    return "\n\n".join(b for b in blocks if b)


# --- documents ----------------------------------------------------------------------------


def parse_document(*, doc_id: str, content: str, fmt: DocFormat, field: str) -> list[Document]:
    """One document (or, for JSONL, one per line) from raw content; `field` names the
    request field in errors."""
    if fmt == "html":
        title, text = html_to_text(content)
        return [Document(id=doc_id, text=text, title=title)]
    if fmt == "markdown":
        return [Document(id=doc_id, text=markdown_to_text(content))]
    if fmt == "rst":
        return [Document(id=doc_id, text=rst_to_text(content))]
    if fmt == "jsonl":
        return list(_jsonl(doc_id=doc_id, content=content, field=field))
    return [Document(id=doc_id, text=_paragraphs(content))]


def _jsonl(*, doc_id: str, content: str, field: str) -> Iterator[Document]:
    for n, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DomainError(f"line {n}: invalid JSON ({exc.msg})", field=field) from exc
        if not isinstance(obj, dict):
            raise DomainError(f"line {n}: expected a JSON object", field=field)
        text = next(
            (
                obj[k]
                for k in ("text", "contents", "content", "body")
                if isinstance(obj.get(k), str)
            ),
            None,
        )
        if text is None:
            raise DomainError(f"line {n}: no string field text/contents/content/body", field=field)
        line_id = obj.get("id", obj.get("docid", obj.get("_id")))
        title = obj.get("title")
        yield Document(
            id=f"{doc_id}/{line_id if line_id is not None else n}",
            text=_paragraphs(text),
            title=title if isinstance(title, str) else None,
        )


def load_path(path: Path) -> Iterator[Document]:
    """Every document under `path` (a file or a directory, walked in sorted order), with ids
    relative to `path`. Files of unknown formats are skipped."""
    if path.is_file():
        files = [path]
        root = path.parent
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        root = path
    else:
        raise DomainError(f"{path} is neither a file nor a directory", field="path")
    for file in files:
        fmt = format_of(file)
        if fmt is None:
            continue
        content = file.read_text(encoding="utf-8", errors="replace")
        yield from parse_document(
            doc_id=file.relative_to(root).as_posix(), content=content, fmt=fmt, field="path"
        )
