"""The fault matrix's private PostgreSQL (`benchmarks/rl_step.py start_postgres`, used by
`benchmarks/faults.py` for `postgres-restart`): a real server of the benchmark's own that a
SIGKILL and restart leave with its committed data."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import rl_step


def _ready(port: int) -> bool:
    argv = ["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
    return subprocess.run(argv, check=False).returncode == 0


def test_a_killed_private_postgres_comes_back_with_its_databases(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    # pytest's tmp_path is private to root; the server runs as the postgres user
    work = Path(tempfile.mkdtemp(prefix="rl-step-pg-test-"))
    os.chmod(work, 0o711)
    proc = rl_step.start_postgres(work / "pg", logs, dict(os.environ))
    try:
        assert rl_step.PG_PORT != 5432
        name = rl_step.create_database()
        os.killpg(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait(10)
        assert not _ready(rl_step.PG_PORT)
        proc.restart()
        deadline = time.monotonic() + 60
        while not _ready(rl_step.PG_PORT) and time.monotonic() < deadline:
            time.sleep(0.2)
        with rl_step._pg_connect("postgres") as conn:
            names = {r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()}
        assert name in names
    finally:
        rl_step.stop(proc)
        rl_step.PG_PORT = 5432
        shutil.rmtree(work, ignore_errors=True)
