"""The demo corpus: Debian's Python 3.11 documentation package (`python3.11-doc`), a real
public text corpus installed from the Debian archive, not text written for this project.

`ensure_demo_corpus()` runs `apt-get download python3.11-doc` and `dpkg-deb -x` into the
cache dir once (about 13 MB download) and returns the HTML root. `python -m
rubricate.miner.demo_corpus [--subset NAME]` prints the path of a subset folder, which
`rubricate corpus ingest` takes.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

PACKAGE: Final = "python3.11-doc"
HTML_ROOT: Final = Path("usr/share/doc/python3.11/html")

SUBSETS: Final[dict[str, tuple[str, ...]]] = {
    # a handful of pages: the end-to-end tests and the benchmark
    "small": ("library/json.html", "library/csv.html", "library/pathlib.html"),
    "tutorial": ("tutorial",),
    "howto": ("howto",),
    "library": ("library",),
    "all": ("tutorial", "howto", "library", "reference", "faq", "glossary.html"),
}


def cache_dir() -> Path:
    base = os.environ.get("RUBRICATE_CACHE_DIR") or str(Path.home() / ".cache" / "rubricate")
    return Path(base) / "corpora" / PACKAGE


def ensure_demo_corpus(dest: Path | None = None) -> Path:
    """The unpacked HTML documentation root, fetched from the Debian archive if missing."""
    target = dest or cache_dir()
    root = target / HTML_ROOT
    if (root / "index.html").is_file():
        return root
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is needed to fetch the demo corpus ({PACKAGE})")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as tmp:
        subprocess.run(
            ["apt-get", "download", PACKAGE],
            cwd=tmp,
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        [deb] = list(Path(tmp).glob(f"{PACKAGE}_*.deb"))
        unpacked = Path(tmp) / "x"
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True, timeout=600)
        shutil.rmtree(target / "usr", ignore_errors=True)
        (unpacked / "usr").rename(target / "usr")
        (target / "SOURCE").write_text(f"{deb.name} from the Debian archive (apt-get download)\n")
    return root


def subset(name: str, dest: Path | None = None) -> Path:
    """A folder holding (symlinks to) the subset's pages, ready to ingest."""
    if name not in SUBSETS:
        raise ValueError(f"unknown subset {name!r}; choose from {sorted(SUBSETS)}")
    root = ensure_demo_corpus(dest)
    out = (dest or cache_dir()) / "subsets" / name
    if out.is_dir():
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for rel in SUBSETS[name]:
        src = root / rel
        link = tmp / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, link)
        else:
            shutil.copy2(src, link)
    tmp.rename(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subset", default="small", choices=sorted(SUBSETS))
    args = parser.parse_args(argv)
    print(subset(args.subset))
    return 0


if __name__ == "__main__":
    sys.exit(main())
