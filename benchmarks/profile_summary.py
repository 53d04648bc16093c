"""Where a process's CPU went, from py-spy's collapsed stacks (`rl_step.py --profile DIR`).

    python benchmarks/profile_summary.py DIR/1024-openrlhf-rl-1024-openrlhf-lean-gateway.txt
    python benchmarks/profile_summary.py FILE --under "AuditSubmitter._hand_over"   # one subtree

Prints the share of samples per leaf function (self time) and per package of the leaf
(rubricate, starlette/fastapi, pydantic, httpx/httpcore, redis, asyncio, json, ...), and the
rubricate functions on the stack most often (inclusive time). With `--under TEXT`, only the
stacks through a frame containing TEXT, and the frames right under it. `rl_step.py` samples
with `--gil` (the thread holding the GIL): on a busy machine a process that holds the GIL
while it waits for a CPU is still sampled, so shares are indicative; the CPU figures come from
/proc.
"""

import argparse
import re
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$")


def package(path: str) -> str:
    """The top package of a frame's file as py-spy names it (`asyncio/events.py`,
    `rubricate/common/auth.py`, or a full path for files outside sys.path)."""
    if "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    if path.startswith("/"):
        return path.rsplit("/", 1)[-1]
    head = path.split("/", 1)[0]
    return "rubricate" if head.startswith("rubricate") else head.removesuffix(".py")


def summarize(path: Path, top: int, under: str | None = None) -> None:
    leaves: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    below: Counter[str] = Counter()
    total = everything = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        everything += count
        frames = stack.split(";")
        if under is not None:
            at = next((i for i, frame in enumerate(frames) if under in frame), None)
            if at is None:
                continue
            below[frames[at + 1] if at + 1 < len(frames) else "(itself)"] += count
        total += count
        leaf = frames[-1]
        m = FRAME.match(leaf)
        leaves[leaf] += count
        packages[package(m.group("file")) if m else leaf] += count
        seen = set()
        for frame in frames:
            fm = FRAME.match(frame)
            own = fm and package(fm.group("file")) == "rubricate" and "<module>" not in frame
            if own and frame not in seen:
                seen.add(frame)
                inclusive[frame] += count
    if not total:
        print(f"{path}: no samples")
        return
    print(f"== {path.name}: {total} samples")
    if under is not None:
        print(f"-- {100 * total / everything:.1f} % of the {everything} samples are under {under}")
        for name, n in below.most_common(top):
            print(f"{100 * n / total:6.1f} %  {name[:150]}")
    print("-- by package of the leaf frame")
    for name, n in packages.most_common(top):
        print(f"{100 * n / total:6.1f} %  {name}")
    print("-- leaf functions (self)")
    for name, n in leaves.most_common(top):
        print(f"{100 * n / total:6.1f} %  {name[:150]}")
    print("-- rubricate functions on the stack (inclusive)")
    for name, n in inclusive.most_common(top):
        print(f"{100 * n / total:6.1f} %  {name[:150]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--under", default=None, help="only the stacks through this frame")
    args = parser.parse_args()
    for path in args.files:
        summarize(path, args.top, args.under)


if __name__ == "__main__":
    main()
