"""What the `rubricate eval` harnesses do the same way: LLM settings from `--backend` (and
`--gateway`), the named items of `--variants` (`--limit`), the `--json` report file, and for
the two injection harnesses the report's number cells, its attacked-minus-clean verdict and
exit status."""

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from rubricate.llm.settings import LLMSettings


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


def llm_settings(backend: str | None, **fixed: object) -> "LLMSettings":
    """The environment's LLM settings with `fixed` and `--backend` (when given) over them."""
    from rubricate.llm.settings import LLMSettings

    overrides: dict[str, object] = dict(fixed)
    if backend:
        overrides["backend"] = backend
    return LLMSettings(**overrides)  # type: ignore[arg-type]


def platform_llm(
    gateway: str | None, backend: str | None, extra: dict[str, Any], **fixed: object
) -> "LLMSettings | None":
    """None when `gateway` names a running gateway to use, else the LLM settings of the
    embedded platform to start (`llm_settings`); either is recorded in `extra` (the report's
    configuration: the gateway, or the backend and the model)."""
    if gateway:
        extra["gateway"] = gateway
        return None
    llm = llm_settings(backend, **fixed)
    extra["backend"] = llm.backend
    extra["model"] = llm.model or llm.embedded_model
    return llm


def write_report(path: Path | None, summary: Mapping[str, Any]) -> None:
    """The summary as indented JSON at `path` (nothing when None), and a line saying so."""
    if path is None:
        return
    Path(path).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"written to {path}")


def select_named(
    items: Sequence[N], names: Sequence[str] | None, *, limit: int | None, what: str
) -> list[N]:
    """The items named (all when None), in `items` order, at most `limit`; ValueError for a
    name none of them has (`what` names the kind of item)."""
    known = {item.name for item in items}
    unknown = sorted(set(names or ()) - known)
    if unknown:
        raise ValueError(f"unknown {what} {unknown}; known: {sorted(known)}")
    chosen = [item for item in items if names is None or item.name in names]
    return chosen if limit is None else chosen[:limit]


def number(value: float | None, *, signed: bool, digits: int) -> str:
    """A report cell: `failed` for None, else the value (with its sign when `signed`)."""
    if value is None:
        return "failed"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def verdict_line(label: str, row: Mapping[str, Any], middle: str, *, digits: int) -> str:
    """`label: max delta +0.12; middle`, then the attacks that could not be compared, if any
    (`row`: a `verdict`)."""
    line = f"{label}: max delta {number(row['max_delta'], signed=True, digits=digits)}; {middle}"
    return line + (f"; failed: {', '.join(row['failed'])}" if row["failed"] else "")


def failed_cell(error: str | None) -> str:
    return f"FAILED ({(error or '')[:80]})"


def verdict(deltas: Mapping[str, float | None], *, above: float) -> dict[str, Any]:
    """Of attacked - clean per attack (None: not scored): the largest, the attacks that
    raised the score by more than `above`, and those that could not be compared."""
    measured = [d for d in deltas.values() if d is not None]
    return {
        "max_delta": max(measured) if measured else None,
        "raised": sorted(n for n, d in deltas.items() if d is not None and d > above),
        "failed": sorted(n for n, d in deltas.items() if d is None),
    }


def exit_status(rows: Iterable[Mapping[str, Any]], *, clean: str) -> int:
    """0: every row's clean `clean` value and attacks scored, none raised; 1: some attack
    raised a score; 2: something could not be scored."""
    rows = list(rows)
    if any(r["failed"] or r["clean"][clean] is None for r in rows):
        return 2
    return 1 if any(r["raised"] for r in rows) else 0
