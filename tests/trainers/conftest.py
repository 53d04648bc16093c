"""Trainer libraries driving a real gateway (an embedded platform with the fake judge)
through their own reward code, each in its own virtualenv (`make trainer-venvs`)."""

import asyncio
import json
import os
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
    result = await asyncio.to_thread(
        subprocess.run,
        [str(python), *launcher, str(DRIVERS / script), *args],
        capture_output=True,
        text=True,
        timeout=limit_s,
        env={**clean, "PYTHONPATH": str(DRIVERS), **(env or {})},
        check=False,
    )
    assert result.returncode == 0, (
        f"{script} exited {result.returncode}\nstdout:\n{result.stdout[-4000:]}\n"
        f"stderr:\n{result.stderr[-6000:]}"
    )
    return json.loads(result.stdout.strip().splitlines()[-1])
