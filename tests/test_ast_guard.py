"""The session-wide guard of `tests/support/ast_guard.py` (CPython 3.11, gh-106905)."""

import ast
import gc
import sys
import traceback

import pytest


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the CPython bug is fixed in 3.12")
def test_a_parse_nested_by_a_finalizer_is_made_again() -> None:
    """A finalizer that formats a traceback during a parse (what a garbage-collected server
    task does) nests a parse; the outer one is made again instead of failing the session."""
    raw = ast.parse.__wrapped__  # type: ignore[attr-defined]

    class FormatsATraceback:
        def __del__(self) -> None:
            try:
                raise ValueError("x")
            except ValueError:
                traceback.format_exc()  # parses the failing line for its carets
            ast.parse("y = (1 + 2) * 3")

    source = "\n".join(f"v{i} = [{i}, ({i}, {i})]" for i in range(3000))
    outcomes = []
    for raw_or_guarded in (raw, ast.parse):
        gc.collect()
        gc.set_threshold(1)  # collect at nearly every allocation, during the parse
        junk = []
        for _ in range(50):  # cycles, so the collector (not refcounting) runs the finalizers
            a = FormatsATraceback()
            a.self = a  # type: ignore[attr-defined]
            junk.append(a)
        del junk, a
        try:
            raw_or_guarded(source)
            outcomes.append("ok")
        except SystemError as e:
            outcomes.append(str(e).split(" (")[0])
        finally:
            gc.set_threshold(700, 10, 10)
    assert outcomes[1] == "ok"
    if outcomes[0] == "ok":
        pytest.skip("this run's collections did not nest a parse (the guard was not exercised)")
    assert outcomes[0] == "AST constructor recursion depth mismatch"
