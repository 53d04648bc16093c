"""A guard for CPython 3.11's AST construction, which is not reentrant (gh-106905).

`ast.parse` keeps its recursion depth in interpreter-wide state. When a garbage collection
inside one parse runs a finalizer that formats a traceback (Python 3.11's traceback module
parses the failing line to place its carets), or another thread parses at the same moment,
the outer parse fails with `SystemError: AST constructor recursion depth mismatch`. In a
test session that error lands wherever pytest happened to be parsing (assertion rewriting,
the report of a failure) and ended a CI run as an INTERNALERROR. It says nothing about the
code under test. So, in tests, a parse runs with the cyclic garbage collector paused (no
finalizer can run inside it) and one thread at a time. Fixed upstream in Python 3.12, where
the guard is not installed.
"""

import ast
import gc
import sys
import threading
from typing import Any

_lock = threading.RLock()


def install() -> None:
    if sys.version_info >= (3, 12) or getattr(ast.parse, "__rubricate_guard__", False):
        return
    original = ast.parse

    def parse(*args: Any, **kwargs: Any) -> Any:
        with _lock:  # threads parse one at a time
            collecting = gc.isenabled()
            gc.disable()
            try:
                return original(*args, **kwargs)
            finally:
                if collecting:
                    gc.enable()

    parse.__rubricate_guard__ = True  # type: ignore[attr-defined]
    parse.__wrapped__ = original  # type: ignore[attr-defined]
    ast.parse = parse
