"""The running embedded platform with a fake judge (`tests/support/gateway.py`)."""

from tests.support.gateway import running

__all__ = ["running"]
