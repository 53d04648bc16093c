"""deploy/scripts/check_images.sh, the opt-in build-and-run check of the images (`make
image-check`). The check itself needs root, buildah and ~20 minutes, so it is not run here;
these tests keep the script in step with the Dockerfiles and the Makefile."""

import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy.support import DOCKER_DIR, ROOT, read_dockerfile

SCRIPT = ROOT / "deploy" / "scripts" / "check_images.sh"
# `build KEY DOCKERFILE TAG args...` up to the end of its `&&`/`\` continuation
_BUILD_CALL = re.compile(r"^\s*build (\S+) (Dockerfile\S*) (?:.*\n)*?.*[^\\&]\n", re.M)


def _build_calls() -> list[tuple[str, str, str]]:
    text = SCRIPT.read_text(encoding="utf-8")
    calls = [(m.group(1), m.group(2), m.group(0)) for m in _BUILD_CALL.finditer(text)]
    assert calls, "no build calls found in check_images.sh"
    return calls


def _declared_args(path: Path) -> set[str]:
    _, global_args, stages = read_dockerfile(path)
    names = set(global_args)
    for stage in stages:
        names |= {i.value.partition("=")[0] for i in stage.all("ARG")}
    return names


def test_script_parses_and_prints_its_usage() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    result = subprocess.run(
        ["bash", str(SCRIPT), "--help"], capture_output=True, text=True, check=True, timeout=30
    )
    assert "Usage" in result.stdout and "make image-check" in result.stdout
    bad = subprocess.run(["bash", str(SCRIPT), "--no-such-flag"], capture_output=True, timeout=30)
    assert bad.returncode == 2


@pytest.mark.parametrize("key,dockerfile,call", _build_calls())
def test_build_args_and_targets_exist_in_the_dockerfile(
    key: str, dockerfile: str, call: str
) -> None:
    path = DOCKER_DIR / dockerfile
    assert path.is_file(), f"{key}: {dockerfile} missing"
    declared = _declared_args(path)
    for name in re.findall(r'--build-arg "?(\w+)=', call):
        assert name in declared, f"{key}: --build-arg {name} is not an ARG of {dockerfile}"
    _, _, stages = read_dockerfile(path)
    targets = re.findall(r"--target (\w+)", call)
    for target in targets:
        assert target in {s.name for s in stages}, f"{key}: no stage {target} in {dockerfile}"
    if not targets:
        # the builder's image ID goes into this ARG of the runtime stage (see build())
        assert "RUBRICATE_VERSION" in {i.value.partition("=")[0] for i in stages[-1].all("ARG")}


def test_every_image_is_built_and_the_base_is_replaceable() -> None:
    built = {dockerfile for _, dockerfile, _ in _build_calls()}
    assert built == {p.name for p in DOCKER_DIR.glob("Dockerfile*")}
    for _, dockerfile, call in _build_calls():
        # the stand-in base goes in through the Dockerfile's own base-image ARG
        _, global_args, stages = read_dockerfile(DOCKER_DIR / dockerfile)
        (base_arg,) = {s.base[2:-1] for s in stages}
        assert base_arg in global_args
        assert f'--build-arg "{base_arg}=$BASE_IMAGE"' in call, dockerfile


def test_make_image_check_is_opt_in() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^image-check:.*\n\tdeploy/scripts/check_images\.sh$", makefile, re.M)
    for target in ("test", "test-fast"):
        rule = re.search(rf"^{target}:(.*)$", makefile, re.M)
        assert rule and "image-check" not in rule.group(1)
