#!/usr/bin/env bash
# Build llama.cpp's C++ `llama-server` for benchmarks/judge_cost.py, from the llama.cpp sources
# vendored in the llama-cpp-python sdist that the project pins (a registry package: nothing
# is fetched from elsewhere). Same portable CPU flags as the project's llama-cpp-python build.
#   usage: build_llama_server.sh <python> <requirement> <dest dir> [cmake args...]
set -euo pipefail
python=$1; requirement=$2; dest=$3; shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --no-binary :all: "$requirement" -d "$work"
tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
src=$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)
mkdir -p "$dest"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF "$@" >/dev/null
cmake --build "$work/build" --target llama-server -j"$(nproc)" >/dev/null
cp "$work/build/bin/llama-server" "$dest/llama-server"
"$dest/llama-server" --version
