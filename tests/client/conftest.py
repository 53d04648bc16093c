"""The adapters are tested against a running embedded platform (FakeJudgeBackend)."""

from tests.services.gateway.conftest import running

__all__ = ["running"]
