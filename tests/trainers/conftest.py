"""Trainer libraries driving a real gateway (an embedded platform with the fake judge)
through their own reward code, each in its own virtualenv (`make trainer-venvs`)."""

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import running

__all__ = ["driver", "running", "trainer_python"]

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = Path(__file__).resolve().parent / "drivers"


def trainer_python(name: str) -> Path:
    """The python of `.venvs/<name>`; skips when it is missing, unless
    RUBRICATE_REQUIRE_TRAINER_VENVS is set (as `make test` does): then it fails."""
    python = ROOT / ".venvs" / name / "bin" / "python"
    if not (ROOT / ".venvs" / name / ".installed").exists():
        message = f".venvs/{name} is not built: run `make trainer-venvs`"
        if os.environ.get("RUBRICATE_REQUIRE_TRAINER_VENVS"):
            pytest.fail(message)
        pytest.skip(message)
    return python


async def driver(
    name: str,
    script: str,
    *args: str,
    env: dict[str, str] | None = None,
    launcher: tuple[str, ...] = (),
    limit_s: float = 300,
) -> Any:
    """Run `drivers/<script>` with the venv's python (after `launcher`, e.g. `-m
    torch.distributed.run --nproc_per_node 2`) off the event loop (the gateway runs on it);
    the driver's last stdout line is JSON."""
    python = trainer_python(name)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RUBRICATE_", "VIRTUAL"))}
    returncode, stdout, stderr = await asyncio.to_thread(
        _run,
        [str(python), *launcher, str(DRIVERS / script), *args],
        env={**clean, "PYTHONPATH": str(DRIVERS), **(env or {})},
        limit_s=limit_s,
    )
    assert returncode == 0, (
        f"{script} exited {returncode}\nstdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-6000:]}"
    )
    return json.loads(stdout.strip().splitlines()[-1])


def _run(argv: list[str], *, env: dict[str, str], limit_s: float) -> tuple[int, str, str]:
    """`argv` in a session of its own; past `limit_s` the whole session is killed (a
    launcher's children too: torchrun's ranks would otherwise outlive the test) and the
    driver fails with what it printed."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return -9, stdout, f"(killed after {limit_s:.0f} s)\n{stderr}"
    return proc.returncode, stdout, stderr
