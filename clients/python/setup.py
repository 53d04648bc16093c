"""Build hook of the client distribution: the gRPC message code `rubricate_client.v1` is
generated from the `.proto` files while the distribution is built, so `pip install
./clients/python[grpc]` (or a wheel, or an sdist) ships working gRPC classes without
`make proto`. The metadata stays in pyproject.toml.

The `.proto` files are found in `RUBRICATE_PROTO_DIR`, in `proto/` beside this file (an
sdist: `sdist` copies them there), or in the repository's `proto/` two levels up (a
checkout). protoc (grpcio-tools, a build requirement) names the modules after the proto path
(`rubricate/v1`); the imports between them are rewritten to the client package, which owns
them. The proto package on the wire stays `rubricate.v1`.
"""

import os
import re
import shutil
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PROTO_SUBDIR = Path("rubricate") / "v1"
GENERATED = Path("rubricate_client") / "v1"
HEADER = '"""Generated from proto/rubricate/v1/*.proto when the client is built: do not edit."""\n'


def proto_root() -> Path:
    candidates = [os.environ.get("RUBRICATE_PROTO_DIR"), HERE / "proto", HERE.parents[1] / "proto"]
    for candidate in candidates:
        if candidate and (Path(candidate) / PROTO_SUBDIR).is_dir():
            return Path(candidate)
    raise RuntimeError(
        "rubricate-client: no proto/rubricate/v1/*.proto found (looked in RUBRICATE_PROTO_DIR, "
        f"{HERE / 'proto'} and {HERE.parents[1] / 'proto'}); build from the repository "
        "checkout or an sdist"
    )


def generate(dest: Path) -> None:
    """Write the generated modules of every `.proto` into `dest` (the `v1` package)."""
    from grpc_tools import protoc

    root = proto_root()
    protos = sorted(str(p.relative_to(root)) for p in (root / PROTO_SUBDIR).glob("*.proto"))
    include = Path(protoc.__file__).resolve().parent / "_proto"
    with tempfile.TemporaryDirectory() as out:
        args = ["protoc", f"-I{root}", f"-I{include}", f"--python_out={out}", f"--pyi_out={out}"]
        if protoc.main([*args, *protos]) != 0:
            raise RuntimeError(f"protoc failed on {protos}")
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for path in sorted((Path(out) / PROTO_SUBDIR).iterdir()):
            text = re.sub(
                r"^from rubricate\.v1 import",
                "from rubricate_client.v1 import",
                path.read_text(),
                flags=re.MULTILINE,
            )
            (dest / path.name).write_text(text)
    (dest / "__init__.py").write_text(HEADER)


class BuildPyWithProto(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            generate(HERE / GENERATED)
        else:
            generate(Path(self.build_lib) / GENERATED)


class SdistWithProto(sdist):  # type: ignore[misc]
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        source = proto_root() / PROTO_SUBDIR
        target = Path(base_dir) / "proto" / PROTO_SUBDIR
        target.mkdir(parents=True, exist_ok=True)
        for proto in sorted(source.glob("*.proto")):
            shutil.copy2(proto, target / proto.name)


setup(cmdclass={"build_py": BuildPyWithProto, "sdist": SdistWithProto})
