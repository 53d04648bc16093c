"""Print the project's requirements for some extras, one a line, leaving out named distributions.

`make setup` installs everything but llama-cpp-python while llama-cpp-python compiles in the
background (scripts/setup.sh): pip cannot be told to skip one requirement of `.[all,dev]`, so
this lists them from pyproject.toml, following the extras that name the project itself
(`rubricate[embeddings]`).

    python scripts/setup_requirements.py pyproject.toml all,dev --without llama-cpp-python
"""

import argparse
import re
import sys
import tomllib
from pathlib import Path


def _name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def requirements(pyproject: Path, extras: list[str], without: set[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    own = _name(project["name"])
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    out: list[str] = []
    seen_extras: set[str] = set()

    def add(reqs: list[str]) -> None:
        for req in reqs:
            name = _name(req)
            if name == own:  # "rubricate[embeddings]": that extra's requirements
                inner = re.search(r"\[([^\]]*)\]", req)
                for extra in inner.group(1).split(",") if inner else []:
                    add_extra(extra.strip())
            elif name not in without and req not in out:
                out.append(req)

    def add_extra(extra: str) -> None:
        if extra in seen_extras:
            return
        if extra not in optional:
            raise SystemExit(f"{pyproject}: no extra {extra!r}")
        seen_extras.add(extra)
        add(optional[extra])

    add(project.get("dependencies", []))
    for extra in extras:
        add_extra(extra)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pyproject", type=Path)
    parser.add_argument("extras", help="comma-separated extras, e.g. all,dev")
    parser.add_argument("--without", action="append", default=[], help="a distribution to omit")
    args = parser.parse_args()
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    without = {_name(w) for w in args.without}
    sys.stdout.write("".join(f"{req}\n" for req in requirements(args.pyproject, extras, without)))


if __name__ == "__main__":
    main()
