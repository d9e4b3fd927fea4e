#!/usr/bin/env bash
# Builds llama.cpp (CPU only, Release, native) from the llama-cpp-python sdist on
# PyPI into bench/peer/.cache/ (git-ignored). The sdist vendors the llama.cpp
# source it was released with, so its version pins the comparison point.
# Usage: bench/peer/build_llamacpp.sh [llama-cpp-python version]   (default 0.3.36)
# Prints the directory holding llama-bench, llama-quantize and llama-completion.
set -euo pipefail
version="${1:-0.3.36}"
here="$(cd "$(dirname "$0")" && pwd)"
cache="$here/.cache"
src="$cache/llama_cpp_python-$version/vendor/llama.cpp"
build="$cache/llama.cpp-$version-build"
mkdir -p "$cache"
if [[ ! -d "$src" ]]; then
  if [[ ! -f "$cache/llama_cpp_python-$version.tar.gz" ]]; then
    pip download --no-binary :all: --no-deps "llama-cpp-python==$version" -d "$cache" >&2
  fi
  tar -C "$cache" -xzf "$cache/llama_cpp_python-$version.tar.gz"
fi
jobs="${JOBS:-2}"
if [[ ! -x "$build/bin/llama-bench" || ! -x "$build/bin/llama-quantize" || ! -x "$build/bin/llama-completion" || ! -x "$build/bin/llama-perplexity" || ! -x "$build/bin/llama-imatrix" || ! -x "$build/bin/llama-embedding" ]]; then
  # No server, no curl/openssl: only the tools the benchmarks run (examples on for
  # llama-embedding, which lives there; only the targets named below are built).
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF >&2
  nice cmake --build "$build" --target llama-bench llama-quantize llama-completion llama-perplexity llama-imatrix llama-embedding -j"$jobs" >&2
fi
echo "$build/bin"
