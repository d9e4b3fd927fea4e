#!/usr/bin/env bash
# Assembles a folder of llama-cpp-python's installed libraries (libllama,
# libmtmd, libggml*) in which libggml-cpu and libggml-base are rebuilt from
# the ggml vendored in the same llama-cpp-python sdist with two F16 roundings
# of an F32 model taken out, so that an oracle for a 1e-3 F32 test does not
# carry them:
#   * GGML_GELU_FP16 undefined (ggml-cpu/vec.h): exact F32 tanh-GELU instead
#     of the F16 lookup table (see build_llamacpp_exactgelu.sh), and
#     GGML_GELU_QUICK_FP16 likewise (CLIP towers' quick GELU, LLaVA-style
#     projector files);
#   * ggml_conv_2d (ggml.c) lays its im2col out in F32 unless the kernel is
#     F16 (released: F16 unless the kernel is BF16), so an F32 patch
#     embedding is not computed on F16-rounded pixels and weights. Alone this
#     put llama.cpp's Gemma 3 soft tokens 2-3.5e-4 (norm) and up to 1.2e-3
#     (element) away from an F32 float64 numpy model of the same file, which
#     agrees with the rounding put back to 2e-7.
# Only ggml is compiled, not llama.cpp: the multimodal library (libmtmd),
# which build_llamacpp_exactgelu.sh does not build, comes from the wheel as is.
#
# Usage: PYTHON=/path/to/python bench/peer/build_ggml_cpu_exactgelu.sh [version]   (default 0.3.36)
# PYTHON (default python3) must import llama_cpp of that version, built with
# libmtmd.so. Prints the folder, for tools/vision_reference.py --lib.
set -euo pipefail
version="${1:-0.3.36}"
py="${PYTHON:-python3}"
here="$(cd "$(dirname "$0")" && pwd)"
cache="$here/.cache"
vendor="$cache/llama_cpp_python-$version/vendor/llama.cpp"
src="$cache/ggml-$version-exactgelu-src"
build="$cache/ggml-$version-exactgelu-build"
out="$cache/llama-cpp-python-$version-libs-exactgelu"
mkdir -p "$cache"
if [[ ! -d "$vendor/ggml" ]]; then
  if [[ ! -f "$cache/llama_cpp_python-$version.tar.gz" ]]; then
    pip download --no-binary :all: --no-deps "llama-cpp-python==$version" -d "$cache" >&2
  fi
  tar -C "$cache" -xzf "$cache/llama_cpp_python-$version.tar.gz"
fi
vec_h="src/ggml-cpu/vec.h"
if [[ ! -f "$src/$vec_h" ]]; then
  rm -rf "$src"
  cp -a "$vendor/ggml" "$src"
  grep -qx '#define GGML_GELU_FP16' "$src/$vec_h" || { echo "no '#define GGML_GELU_FP16' in $vec_h" >&2; exit 1; }
  sed -i 's|^#define GGML_GELU_FP16$|// #define GGML_GELU_FP16  (removed by llmrt: exact F32 GELU)|' "$src/$vec_h"
  im2col='a->type == GGML_TYPE_BF16 ? GGML_TYPE_F32 : GGML_TYPE_F16); // \[N, OH, OW, IC \* KH \* KW\]'
  grep -q "$im2col" "$src/src/ggml.c" || { echo "ggml_conv_2d's im2col type not found in src/ggml.c" >&2; exit 1; }
  sed -i "s|$im2col|a->type == GGML_TYPE_F16 ? GGML_TYPE_F16 : GGML_TYPE_F32); // [N, OH, OW, IC * KH * KW] (llmrt: F32 im2col)|" "$src/src/ggml.c"
  [[ -f "$src/ggml.pc.in" ]] || : > "$src/ggml.pc.in"   # the sdist leaves it out; ggml's CMake wants it
fi
if grep -qx '#define GGML_GELU_QUICK_FP16' "$src/$vec_h"; then
  sed -i 's|^#define GGML_GELU_QUICK_FP16$|// #define GGML_GELU_QUICK_FP16  (removed by llmrt: exact F32 quick GELU)|' "$src/$vec_h"
fi
if grep -qx '#define GGML_GELU_FP16' "$src/$vec_h"; then
  echo "$src/$vec_h still defines GGML_GELU_FP16" >&2
  exit 1
fi
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=ON \
    -DGGML_OPENMP=ON -DGGML_CUDA=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >&2
fi
nice -n 19 cmake --build "$build" --target ggml-cpu -j"${JOBS:-2}" >&2   # incremental
wheel_lib="$("$py" -c 'import llama_cpp, os; print(os.path.join(os.path.dirname(llama_cpp.__file__), "lib"))')"
have="$("$py" -c 'import llama_cpp; print(llama_cpp.__version__)')"
[[ "$have" == "$version" ]] || { echo "$py imports llama_cpp $have, not $version" >&2; exit 1; }
[[ -f "$wheel_lib/libmtmd.so" ]] || { echo "no libmtmd.so in $wheel_lib" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
cp -a "$wheel_lib"/. "$out"/
rm -f "$out"/libggml-cpu.so* "$out"/libggml-base.so*
cp -a "$build"/src/libggml-cpu.so* "$build"/src/libggml-base.so* "$out"/
cat > "$out/llmrt-oracle.txt" <<EON
llama-cpp-python $version's wheel libraries with libggml-cpu and libggml-base rebuilt by bench/peer/build_ggml_cpu_exactgelu.sh from its vendored ggml (CPU, Release, GGML_NATIVE=ON) with GGML_GELU_FP16 and GGML_GELU_QUICK_FP16 undefined (exact F32 tanh-GELU/GeGLU and quick GELU instead of the F16 lookup tables) and ggml_conv_2d's im2col in F32 for an F32 kernel (not F16)
EON
echo "$out"
