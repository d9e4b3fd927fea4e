#!/usr/bin/env bash
# Builds libllama.so (CPU only, Release, native, shared) from the llama.cpp
# vendored in the llama-cpp-python sdist with one change: GGML_GELU_FP16 is
# not defined, so the CPU GELU and GeGLU compute tanh-GELU in F32
# (ggml_gelu_f32) instead of rounding the input to F16, looking the result up
# in an F16 table and returning that F16 value. That rounding alone puts
# llama.cpp ~2.6e-3 relative away from an exact F32 GELU on tools/
# family_reference.py's gemma2 model; an oracle for a 1e-3 test must not
# carry it. Everything else is llama.cpp as released.
#
# Usage: bench/peer/build_llamacpp_exactgelu.sh [llama-cpp-python version]   (default 0.3.36)
# Prints the directory holding libllama.so, for LLAMA_CPP_LIB_PATH (or
# tools/family_reference.py --lib). Writes llmrt-oracle.txt there, saying
# what was built; family_reference.py records it in the reference.
set -euo pipefail
version="${1:-0.3.36}"
here="$(cd "$(dirname "$0")" && pwd)"
cache="$here/.cache"
vendor="$cache/llama_cpp_python-$version/vendor/llama.cpp"
src="$cache/llama.cpp-$version-exactgelu-src"
build="$cache/llama.cpp-$version-exactgelu-build"
mkdir -p "$cache"
if [[ ! -d "$vendor" ]]; then
  if [[ ! -f "$cache/llama_cpp_python-$version.tar.gz" ]]; then
    pip download --no-binary :all: --no-deps "llama-cpp-python==$version" -d "$cache" >&2
  fi
  tar -C "$cache" -xzf "$cache/llama_cpp_python-$version.tar.gz"
fi
vec_h="ggml/src/ggml-cpu/vec.h"
if [[ ! -f "$src/$vec_h" ]]; then
  rm -rf "$src"
  cp -a "$vendor" "$src"
  rm -rf "$src/models" "$src/.git"
  grep -qx '#define GGML_GELU_FP16' "$src/$vec_h" || { echo "no '#define GGML_GELU_FP16' in $vec_h" >&2; exit 1; }
  sed -i 's|^#define GGML_GELU_FP16$|// #define GGML_GELU_FP16  (removed by llmrt: exact F32 GELU)|' "$src/$vec_h"
fi
if grep -qx '#define GGML_GELU_FP16' "$src/$vec_h"; then
  echo "$src/$vec_h still defines GGML_GELU_FP16" >&2
  exit 1
fi
jobs="${JOBS:-2}"
if [[ ! -f "$build/bin/libllama.so" ]]; then
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
    -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF >&2
  nice cmake --build "$build" --target llama -j"$jobs" >&2
fi
cat > "$build/bin/llmrt-oracle.txt" <<EOF
the llama.cpp vendored in llama-cpp-python $version, built by bench/peer/build_llamacpp_exactgelu.sh (CPU, Release, GGML_NATIVE=ON, shared libraries) with GGML_GELU_FP16 undefined in $vec_h (exact F32 tanh-GELU/GeGLU instead of the F16 lookup table)
EOF
echo "$build/bin"
