import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rubricate.llm.model_files import locate_smollm2
from tests.support import parallel

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


LLAMA_SERVER_N_CTX = 2048
STARTUP_TIMEOUT_S = 90.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture(scope="session")
def llama_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m llama_cpp.server` (SmolLM2-135M) on loopback, once per session; yields its
    base URL (…/v1). Tests using it run the real model: run them under the model lock."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(smollm2_path),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                str(LLAMA_SERVER_N_CTX),
                "--n_threads",
                # one under xdist: its worker runs niced beside the real-model tests, and two
                # threads wait on each other at every barrier when one is held off its core
                # (60 s timeouts in `make test`, tests/support/parallel.py)
                "1" if parallel.worker_number() is not None else "2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                tail = log_path.read_text()[-3000:]
                pytest.fail(f"llama.cpp server exited ({process.returncode}):\n{tail}")
            try:
                if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                tail = log_path.read_text()[-3000:]
                pytest.fail(f"llama.cpp server not ready in {STARTUP_TIMEOUT_S}s:\n{tail}")
            time.sleep(0.2)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
