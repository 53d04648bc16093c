import os
from pathlib import Path

import pytest

from rubricate.llm.model_files import locate_smollm2

try:
    import llama_cpp  # noqa: F401

    LLAMA_CPP_ERROR: str | None = None
except ImportError as exc:  # pragma: no cover - llama-cpp-python is a core dependency
    LLAMA_CPP_ERROR = f"llama_cpp cannot be imported: {exc}"

needs_llama_cpp = pytest.mark.skipif(LLAMA_CPP_ERROR is not None, reason=LLAMA_CPP_ERROR or "")


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings under test come from the test, not from the developer's shell."""
    for name in list(os.environ):
        if name.upper().startswith("RUBRICATE_LLM_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    return locate_smollm2()
