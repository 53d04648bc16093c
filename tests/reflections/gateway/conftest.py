"""The running embedded platform with a fake judge (`tests/support/gateway.py`), and the
reflection tests' platform on PostgreSQL and Redis (`stack.py`)."""

from tests.reflections.gateway.stack import stack
from tests.support.gateway import running

__all__ = ["running", "stack"]
