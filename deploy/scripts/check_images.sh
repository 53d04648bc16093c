#!/usr/bin/env bash
# Build the images of deploy/docker/ and run them, on a machine with no Docker engine and no
# Docker Hub: buildah builds, podman runs, and a stand-in for python:3.11-slim-bookworm is
# made from Debian packages (debootstrap + Debian's Python 3.11). Prints a summary: image
# sizes, the user the containers run as, `rubricate --help`, the HEALTHCHECK against /healthz.
#
# Images (keys for --only): service (Dockerfile: gateway, store, migrations, openai-backend
# model servers), miner (Dockerfile.miner), model-cpu (Dockerfile.model-cpu), model-gpu
# (Dockerfile.model-gpu, builder stage only). Every image's size is printed, next to the size
# recorded for the image that ran the role before the split by extras (docs/deploy.md).
#
# Usage (as root; about 30 minutes the first time on 2 shared cores, most of it compiling
# llama-cpp-python for the CPU model image; the other images compile nothing):
#
#   sudo deploy/scripts/check_images.sh [--only service,miner,model-cpu,model-gpu]
#                                       [--embedded-model qwen2.5-coder-1.5b|smollm2-135m]
#                                       [--rebuild-base] [--keep]
#
# `make image-check` runs it. Opt-in, not part of `make test`: it needs root, buildah, podman,
# runc and debootstrap (installed with apt-get when missing), a Debian mirror and PyPI.
#
# What it does, and how it differs from `docker build` on a machine with Docker Hub:
# - Base image: `localhost/rubricate-check/python:3.11-slim-bookworm`, built once from
#   `debootstrap --variant=minbase bookworm` plus Debian's python3.11, python3.11-venv and
#   python3-pip; pip upgraded from PyPI; /usr/local/bin/python{,3} point at Debian's
#   python3.11; Debian's EXTERNALLY-MANAGED marker removed (the real image has none); the
#   slim images' dpkg excludes (docs, man pages, locales). Passed as --build-arg PYTHON_IMAGE.
#   See docs/deploy.md, "Checking the images without Docker", for the differences.
# - PyTorch: when download.pytorch.org is unreachable, the CPU wheel pinned by
#   requirements-cpu.txt is served from TORCH_WHEEL_DIR (default /opt/wheels) by a local
#   index on 127.0.0.1 and passed as --build-arg TORCH_INDEX_URL (same wheel name, so the same
#   resolution as from PyTorch's CPU index).
# - Builds: `buildah bud --isolation chroot --network host --format docker --layers`; docker
#   format keeps HEALTHCHECK (OCI image configs have no field for it). RUN steps use the host
#   network, so pip and apt inside reach PyPI and the Debian mirror directly (the host's pip
#   configuration is not inside the container).
# - Runs: podman with no network (`--network none`: the container has its own loopback, so
#   the default ports and commands are used unchanged and nothing can be downloaded at run
#   time), the way the Helm chart runs the pods: read-only root file system, tmpfs on /tmp and
#   the home directory, all capabilities dropped, no-new-privileges, the image's own user.
#
# Environment: WORK_DIR (default /var/tmp/rubricate-image-check: storage, logs, base rootfs),
# STORAGE_DRIVER (overlay; vfs also works, slower and several times the disk),
# DEBIAN_MIRROR, TORCH_INDEX_URL (skip the detection), TORCH_WHEEL_DIR, TORCH_INDEX_PORT
# (38471), CA_BUNDLE (see below), HEALTH_TIMEOUT_S.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK_DIR="${WORK_DIR:-/var/tmp/rubricate-image-check}"
STORAGE_DRIVER="${STORAGE_DRIVER:-overlay}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
TORCH_WHEEL_DIR="${TORCH_WHEEL_DIR:-/opt/wheels}"
HEALTH_TIMEOUT_S="${HEALTH_TIMEOUT_S:-600}"
BASE_IMAGE="localhost/rubricate-check/python:3.11-slim-bookworm"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -n 1)"

ONLY="service,miner,model-cpu,model-gpu"
EMBEDDED_MODEL="qwen2.5-coder-1.5b"
REBUILD_BASE=0
KEEP=0
while (($#)); do
    case "$1" in
        --only) ONLY="$2"; shift 2 ;;
        --embedded-model) EMBEDDED_MODEL="$2"; shift 2 ;;
        --rebuild-base) REBUILD_BASE=1; shift ;;
        --keep) KEEP=1; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done
wants() { [[ ",$ONLY," == *",$1,"* ]]; }

LOGS="$WORK_DIR/logs"
mkdir -p "$LOGS" "$WORK_DIR/storage" "$WORK_DIR/run"
BUILDAH=(buildah --root "$WORK_DIR/storage" --runroot "$WORK_DIR/run" --storage-driver "$STORAGE_DRIVER")
# runc, not crun: crun refuses hybrid cgroup v1/v2 hosts ("cgroups in hybrid mode not supported")
PODMAN=(podman --root "$WORK_DIR/storage" --runroot "$WORK_DIR/run" --storage-driver "$STORAGE_DRIVER"
    --runtime runc --cgroup-manager cgroupfs --events-backend file)
BUD=(bud --isolation chroot --network host --format docker --layers --pull=never)
# RUN steps trust what the host trusts (a TLS-intercepting egress proxy's CA, say): the host's
# bundle is bind-mounted over the image's for the build only and is not in any layer.
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
CA_MOUNT=()
[[ $CA_BUNDLE != none && -f $CA_BUNDLE ]] \
    && CA_MOUNT=(--volume "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro")
# podman asks for RLIMIT_NOFILE/NPROC above the hard limits unless told; without
# CAP_SYS_RESOURCE that fails ("setrlimit RLIMIT_NPROC: Operation not permitted"), so ask for
# the host's own limits (nproc: no more than pid_max, which is what the runtime gets).
nproc_limit="$(ulimit -Hu)"
pid_max="$(cat /proc/sys/kernel/pid_max)"
if [[ $nproc_limit == unlimited ]] || ((nproc_limit > pid_max)); then nproc_limit="$pid_max"; fi
nofile_limit="$(ulimit -Hn)"
if [[ $nofile_limit == unlimited ]]; then nofile_limit=1048576; fi
LIMITS=(--ulimit "nofile=$nofile_limit:$nofile_limit" --ulimit "nproc=$nproc_limit:$nproc_limit")

declare -a SUMMARY=()
FAILED=0
note() { printf '==> %s\n' "$*" >&2; }
row() { SUMMARY+=("$(printf '%-11s %-30s %s' "$1" "$2" "$3")"); }
pass() { row "$1" "$2" "PASS ${3:-}"; }
fail() { row "$1" "$2" "FAIL ${3:-}"; FAILED=1; }

CLEANUP=()
# shellcheck disable=SC2329  # called by the trap
cleanup() { local c; for c in "${CLEANUP[@]}"; do eval "$c" || true; done; }
trap cleanup EXIT

# ------------------------------------------------------------------------------ prerequisites
if [[ $(id -u) -ne 0 ]]; then
    echo "check_images.sh needs root (buildah's chroot isolation, debootstrap)" >&2
    exit 2
fi
missing=()
for tool in buildah podman runc debootstrap curl; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
    note "installing ${missing[*]} with apt-get"
    apt-get update -q >"$LOGS/apt.log" 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >>"$LOGS/apt.log" 2>&1
fi
note "$(buildah --version), $(podman --version); storage $STORAGE_DRIVER under $WORK_DIR; logs in $LOGS"

# ------------------------------------------------------------------------------- base stand-in
build_base() {
    local ctx="$WORK_DIR/base"
    rm -rf "$ctx"
    mkdir -p "$ctx"
    note "base stand-in: debootstrap bookworm (log: $LOGS/base.log)"
    debootstrap --variant=minbase \
        --include=python3.11,python3.11-venv,python3-pip,ca-certificates,netbase,tzdata \
        bookworm "$ctx/rootfs" "$DEBIAN_MIRROR" >"$LOGS/base.log" 2>&1
    # an image's /dev, /proc and /sys are empty: the runtime mounts them
    tar -C "$ctx/rootfs" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
        -cf "$ctx/rootfs.tar" .
    rm -rf "$ctx/rootfs"
    cat >"$ctx/Containerfile" <<'EOF'
# Stand-in for python:3.11-slim-bookworm, built by deploy/scripts/check_images.sh.
FROM scratch
ADD rootfs.tar /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
RUN set -eux; \
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
        'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' \
        'path-exclude /usr/share/locale/*' 'path-exclude /usr/share/groff/*' \
        'path-exclude /usr/share/lintian/*' 'path-exclude /usr/share/linda/*' \
        > /etc/dpkg/dpkg.cfg.d/docker-slim; \
    printf '%s\n' \
        'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };' \
        'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };' \
        'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";' > /etc/apt/apt.conf.d/docker-clean; \
    echo 'Acquire::Languages "none";' > /etc/apt/apt.conf.d/docker-no-languages; \
    echo 'Acquire::GzipIndexes "true";' > /etc/apt/apt.conf.d/docker-gzip-indexes; \
    echo 'Apt::AutoRemove::SuggestsImportant "false";' > /etc/apt/apt.conf.d/docker-autoremove-suggests; \
    find /usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete; \
    find /usr/share/doc -mindepth 1 -type d -empty -delete; \
    rm -rf /usr/share/man/* /usr/share/info/* /usr/share/locale/* /usr/share/groff/* \
        /usr/share/lintian/* /usr/share/linda/*; \
    rm -f /etc/apt/sources.list; \
    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' \
        'Suites: bookworm bookworm-updates' 'Components: main' \
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' '' \
        'Types: deb' 'URIs: http://deb.debian.org/debian-security' 'Suites: bookworm-security' \
        'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
        > /etc/apt/sources.list.d/debian.sources; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get upgrade -y; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED; \
    ln -s /usr/bin/python3.11 /usr/local/bin/python; \
    ln -s /usr/bin/python3.11 /usr/local/bin/python3
EOF
    # pip from PyPI in a second build: the CA bundle mount would block apt's ca-certificates
    # upgrade above (it rewrites the bundle)
    cat >"$ctx/Containerfile.pip" <<EOF
FROM $BASE_IMAGE-apt
RUN python -m pip install --no-cache-dir --upgrade pip && python --version && pip --version
CMD ["python3"]
EOF
    note "base stand-in: buildah bud $BASE_IMAGE"
    "${BUILDAH[@]}" "${BUD[@]}" --squash -t "$BASE_IMAGE-apt" "$ctx" >>"$LOGS/base.log" 2>&1
    "${BUILDAH[@]}" "${BUD[@]}" "${CA_MOUNT[@]}" -f "$ctx/Containerfile.pip" -t "$BASE_IMAGE" "$ctx" \
        >>"$LOGS/base.log" 2>&1
    "${BUILDAH[@]}" rmi "$BASE_IMAGE-apt" >>"$LOGS/base.log" 2>&1
    rm -f "$ctx/rootfs.tar"
}

if ((REBUILD_BASE)) || ! "${BUILDAH[@]}" inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
    build_base
fi
BASE_SIZE="$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$BASE_IMAGE")"
BASE_PYTHON="$("${PODMAN[@]}" run "${LIMITS[@]}" --rm --network none "$BASE_IMAGE" python --version 2>&1)"
BASE_PIP="$("${PODMAN[@]}" run "${LIMITS[@]}" --rm --network none "$BASE_IMAGE" pip --version | cut -d' ' -f1-2)"
note "base stand-in: $BASE_PYTHON, $BASE_PIP, $((BASE_SIZE / 1000000)) MB"

# ------------------------------------------------------------------------------ PyTorch index
if [[ -z ${TORCH_INDEX_URL:-} ]] && wants miner; then
    if curl -fs -m 10 -o /dev/null https://download.pytorch.org/whl/cpu/torch/; then
        TORCH_INDEX_URL="https://download.pytorch.org/whl/cpu"
    else
        torch_version="$(sed -n 's/^torch==//p' "$ROOT/requirements-cpu.txt")"
        wheel="$(compgen -G "$TORCH_WHEEL_DIR/torch-${torch_version}+cpu-cp311-cp311-*linux*_x86_64.whl" | head -n 1 || true)"
        if [[ -z $wheel ]]; then
            echo "download.pytorch.org is unreachable and $TORCH_WHEEL_DIR has no" \
                "torch-${torch_version}+cpu cp311 wheel: set TORCH_WHEEL_DIR or TORCH_INDEX_URL" >&2
            exit 2
        fi
        mkdir -p "$WORK_DIR/torch-index/torch"
        rm -f "$WORK_DIR"/torch-index/torch/*.whl
        ln -s "$wheel" "$WORK_DIR/torch-index/torch/"
        # a fixed port: the URL is a build argument, so a new one would miss the layer cache
        port="${TORCH_INDEX_PORT:-38471}"
        if ! python3 -c "import socket, sys; socket.socket().bind(('127.0.0.1', int(sys.argv[1])))" "$port" 2>/dev/null; then
            echo "port $port on 127.0.0.1 is taken: set TORCH_INDEX_PORT to a free one" >&2
            exit 2
        fi
        python3 -m http.server --bind 127.0.0.1 --directory "$WORK_DIR/torch-index" "$port" \
            >"$LOGS/torch-index.log" 2>&1 &
        CLEANUP+=("kill $!")
        TORCH_INDEX_URL="http://127.0.0.1:$port/"
        for _ in $(seq 50); do curl -fs -o /dev/null "$TORCH_INDEX_URL/torch/" && break; sleep 0.1; done
        note "download.pytorch.org unreachable: serving $(basename "$wheel") at $TORCH_INDEX_URL"
    fi
fi

# -------------------------------------------------------------------------------------- build
build() { # build KEY DOCKERFILE TAG [buildah args...]
    local key="$1" dockerfile="$2" tag="$3" start=$SECONDS id
    local log="$LOGS/build-$key.log"
    shift 3
    local bud=("${BUILDAH[@]}" "${BUD[@]}" "${CA_MOUNT[@]}" -f "deploy/docker/$dockerfile")
    note "building $tag from deploy/docker/$dockerfile (log: $log)"
    : >"$log"
    if [[ " $* " != *" --target "* ]]; then
        # Two faults of buildah 1.28's layer cache: it keys a cached
        # `RUN --mount=type=bind,from=builder` on the instruction alone, not on what the builder
        # holds (a changed builder left the old runtime layers), and when every step of the
        # builder comes from the cache such a mount is empty. So: build the builder, drop the
        # cached image of its last step (the full build then runs that step again), and pass
        # the builder's image ID in RUBRICATE_VERSION, an ARG of the runtime stage and so part
        # of the cache key of every runtime step.
        if (cd "$ROOT" && nice -n 10 "${bud[@]}" --target builder \
            -t "localhost/rubricate-check/$key-builder:$VERSION" "$@" .) >>"$log" 2>&1; then
            id="$("${PODMAN[@]}" image inspect --format '{{.Id}}' \
                "localhost/rubricate-check/$key-builder:$VERSION")"
            "${BUILDAH[@]}" rmi "localhost/rubricate-check/$key-builder:$VERSION" >>"$log" 2>&1
            set -- "$@" --build-arg "RUBRICATE_VERSION=$VERSION+builder.${id:0:12}"
        else
            build_failed "$key" "$log"
            return 1
        fi
    fi
    if (cd "$ROOT" && nice -n 10 "${bud[@]}" -t "$tag" "$@" .) >>"$log" 2>&1; then
        pass "$key" "build ($((SECONDS - start)) s)"
        return 0
    fi
    build_failed "$key" "$log"
    return 1
}
build_failed() {
    fail "$1" "build" "(tail of $2 below)"
    tail -n 30 "$2" >&2
}

# ------------------------------------------------------------------------------------ run checks
AUTH_ENV=(-e RUBRICATE_AUTH_MODE=api_key
    -e "RUBRICATE_AUTH_API_KEYS=image-check:$(printf 'rk_image_check' | sha256sum | cut -d' ' -f1)"
    -e RUBRICATE_AUTH_INTERNAL_TOKEN=image-check-internal-token)
# as the Helm chart runs the pods (values.yaml: containerSecurityContext, scratch volumes)
# shellcheck disable=SC2054  # the commas are tmpfs mount options
HARDENED=(--network none --read-only --tmpfs /tmp:rw,mode=1777
    --tmpfs /home/rubricate:rw,U
    --cap-drop ALL --security-opt no-new-privileges)

# Sizes recorded by this script on 2026-11-22 (docs/deploy.md, "Results"), before the images
# were split by extras: the one service image (gateway, store, migrations, miner: llama.cpp
# and PyTorch in all of them) and the CPU model image (with PyTorch).
declare -A BEFORE_MB=([service]=1786 [miner]=1786 [model-cpu]=2903)
declare -A BEFORE_WHAT=([service]="the all-in-one rubricate image" [miner]="the all-in-one rubricate image"
    [model-cpu]="rubricate-model-cpu with PyTorch")

size_row() { # size_row KEY TAG
    local key="$1" tag="$2" size before=""
    size="$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$tag")"
    [[ -n ${BEFORE_MB[$key]:-} ]] && before="; before: ${BEFORE_MB[$key]} MB, ${BEFORE_WHAT[$key]}"
    row "$key" "size" "$((size / 1000000)) MB ($(((size - BASE_SIZE) / 1000000)) MB above the base$before)"
}

check_absent() { # check_absent KEY TAG MODULE... : the image must not carry these
    local key="$1" tag="$2" found
    shift 2
    found="$("${PODMAN[@]}" run "${LIMITS[@]}" --rm --no-healthcheck --network none "$tag" python -c \
        "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)))" "$@" 2>&1)" || true
    if [[ -z $found ]]; then pass "$key" "leaves out $*"
    else fail "$key" "leaves out $*" "found: $found"; fi
}

check_image() { # check_image KEY TAG
    local key="$1" tag="$2" user hc ident ctr deadline state
    size_row "$key" "$tag"
    config() { "${BUILDAH[@]}" inspect --type image "$tag" | python3 -c \
        "import json, sys; print(json.dumps(json.load(sys.stdin)['Docker']['config'].get('$1')))"; }
    user="$(config User)"
    hc="$(config Healthcheck)"
    if [[ $hc == *rubricate-healthcheck* ]]; then pass "$key" "HEALTHCHECK in the image" "$hc"
    else fail "$key" "HEALTHCHECK in the image" "$hc"; fi

    ident="$("${PODMAN[@]}" run "${LIMITS[@]}" --rm --no-healthcheck --network none "$tag" id 2>&1)" || true
    if [[ $ident == uid=10001\(rubricate\)\ gid=10001\(rubricate\)* ]]; then
        pass "$key" "non-root (USER $user)" "$ident"
    else fail "$key" "non-root (USER $user)" "$ident"; fi

    if "${PODMAN[@]}" run "${LIMITS[@]}" --rm --no-healthcheck "${HARDENED[@]}" "$tag" rubricate --help >"$LOGS/help-$key.log" 2>&1; then
        pass "$key" "rubricate --help"
    else fail "$key" "rubricate --help" "$(tail -n 3 "$LOGS/help-$key.log")"; fi

    # the image's own CMD with production auth settings; the HEALTHCHECK decides
    ctr="rubricate-check-$key"
    "${PODMAN[@]}" rm -f "$ctr" >/dev/null 2>&1 || true
    # (podman says on stderr that it cannot reach systemd to schedule the check: it is run
    # here by `podman healthcheck run` instead)
    "${PODMAN[@]}" run "${LIMITS[@]}" -d --name "$ctr" "${HARDENED[@]}" "${AUTH_ENV[@]}" "$tag" \
        >"$LOGS/podman-$key.log" 2>&1
    ((KEEP)) || CLEANUP+=("${PODMAN[*]} rm -f $ctr >/dev/null 2>&1")
    local start=$SECONDS
    deadline=$((SECONDS + HEALTH_TIMEOUT_S))
    while :; do
        if "${PODMAN[@]}" healthcheck run "$ctr" >/dev/null 2>&1; then
            pass "$key" "HEALTHCHECK (default CMD)" "healthy after $((SECONDS - start)) s"
            break
        fi
        state="$("${PODMAN[@]}" inspect --format '{{.State.Status}}' "$ctr" 2>/dev/null || echo gone)"
        if [[ $state != running ]] || ((SECONDS > deadline)); then
            fail "$key" "HEALTHCHECK (default CMD)" "container $state, see $LOGS/run-$key.log"
            break
        fi
        sleep 3
    done
    if "${PODMAN[@]}" exec "$ctr" rubricate-healthcheck \
        "http://127.0.0.1:$("${PODMAN[@]}" exec "$ctr" printenv RUBRICATE_PORT)/readyz" \
        >"$LOGS/readyz-$key.log" 2>&1; then
        row "$key" "/readyz" "ready"
    else
        row "$key" "/readyz" "not ready (no network, so no upstreams: expected for the gateway)"
    fi
    "${PODMAN[@]}" logs "$ctr" >"$LOGS/run-$key.log" 2>&1 || true
    # and the same check fails when nothing listens
    "${PODMAN[@]}" run "${LIMITS[@]}" -d --name "$ctr-idle" "${HARDENED[@]}" "$tag" sleep 120 \
        >>"$LOGS/podman-$key.log" 2>&1
    if "${PODMAN[@]}" healthcheck run "$ctr-idle" >>"$LOGS/podman-$key.log" 2>&1; then
        fail "$key" "HEALTHCHECK fails if idle" "healthy with no server running"
    else pass "$key" "HEALTHCHECK fails if idle"; fi
    "${PODMAN[@]}" rm -f -t 0 "$ctr-idle" >/dev/null 2>&1 || true
    # in open mode (the default) the services refuse to listen on 0.0.0.0
    if "${PODMAN[@]}" run "${LIMITS[@]}" --rm --no-healthcheck --network none "$tag" \
        >"$LOGS/open-$key.log" 2>&1; then
        fail "$key" "default env refuses 0.0.0.0" "it started without authentication"
    elif grep -q "refusing to listen" "$LOGS/open-$key.log"; then
        pass "$key" "default env refuses 0.0.0.0"
    else fail "$key" "default env refuses 0.0.0.0" "$(tail -n 2 "$LOGS/open-$key.log")"; fi
}

if wants service; then
    build service Dockerfile "localhost/rubricate:$VERSION" \
        --build-arg "PYTHON_IMAGE=$BASE_IMAGE" \
        && { check_image service "localhost/rubricate:$VERSION"; check_absent service "localhost/rubricate:$VERSION" torch llama_cpp sentence_transformers celery; }
fi
if wants miner; then
    build miner Dockerfile.miner "localhost/rubricate-miner:$VERSION" \
        --build-arg "PYTHON_IMAGE=$BASE_IMAGE" --build-arg "TORCH_INDEX_URL=$TORCH_INDEX_URL" \
        && { check_image miner "localhost/rubricate-miner:$VERSION"; check_absent miner "localhost/rubricate-miner:$VERSION" llama_cpp vllm; }
fi
if wants model-cpu; then
    build model-cpu Dockerfile.model-cpu "localhost/rubricate-model-cpu:$VERSION" \
        --build-arg "PYTHON_IMAGE=$BASE_IMAGE" --build-arg "EMBEDDED_MODEL=$EMBEDDED_MODEL" \
        && { check_image model-cpu "localhost/rubricate-model-cpu:$VERSION"; check_absent model-cpu "localhost/rubricate-model-cpu:$VERSION" torch sentence_transformers celery; }
fi
if wants model-gpu; then
    # No CUDA/vLLM base here. Its builder stage (the two Rubricate wheels, the requirement
    # list) runs on the stand-in; the runtime stage would install vLLM with CUDA from PyPI, not
    # done here, so this image has no size to print.
    build model-gpu Dockerfile.model-gpu "localhost/rubricate-check/model-gpu-builder:$VERSION" \
        --build-arg "VLLM_IMAGE=$BASE_IMAGE" --target builder \
        && if "${PODMAN[@]}" run "${LIMITS[@]}" --rm --network none "localhost/rubricate-check/model-gpu-builder:$VERSION" \
            ls /wheels >"$LOGS/gpu-wheels.log" 2>&1 && grep -q '^rubricate-' "$LOGS/gpu-wheels.log" \
            && grep -q '^rubricate_client-' "$LOGS/gpu-wheels.log" \
            && ! grep -q '^llama_cpp_python-' "$LOGS/gpu-wheels.log"; then
            pass model-gpu "builder stage on the stand-in" "$(tr '\n' ' ' <"$LOGS/gpu-wheels.log")"
        else fail model-gpu "builder stage on the stand-in" "$(tr '\n' ' ' <"$LOGS/gpu-wheels.log")"; fi
    row model-gpu "size" "n/a: the runtime stage needs the vllm/vllm-openai base (CUDA, PyTorch, vLLM)"
fi

# ------------------------------------------------------------------------------------ summary
echo
echo "Rubricate image check, $(date -u '+%Y-%m-%d %H:%M UTC'), $(buildah --version)"
echo "base: stand-in $BASE_IMAGE ($BASE_PYTHON, $BASE_PIP, $((BASE_SIZE / 1000000)) MB)"
echo "torch index: ${TORCH_INDEX_URL:-n/a}"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
