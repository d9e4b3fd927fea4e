#!/usr/bin/env bash
# gpu-pack.sh: builds, on this (CPU) machine, everything a lent GPU machine
# runs, into a small folder that travels with the tree (`carry`) and that
# scripts/gpu-check.sh runs there (kernels/README.md: the one device call).
#
#   cuda-tests  every CUDA test file (LLM_CUDA_PACK_TESTS, tests/CMakeLists.txt:
#               all test_cuda_* but the emulator's own) in one GoogleTest
#               binary, GoogleTest linked in statically (the GPU machine has none)
#   cuda-bench  the CUDA figures (bench/cuda_bench.cpp)
#   llm-synth   the model synthesizer (8B shapes for the benchmarks)
#   groups.tsv  one test group per test file: its name and GoogleTest filter
#               (the suites that file defines), so a crash or hang costs one group
#   gtest/      GoogleTest's headers and static libraries, for the fallback:
#               building on the device (gpu-check.sh --build-on-device)
#   STAMP       commit, date, build flags, toolchain, sizes and SHA-256 of it all
#               (the device has no .git: the report names the commit from here)
#
# Built for a real GPU: -DLLM_CUDA=ON, Release, sm_90 (+ compute_90 PTX);
# --arch 80,89,90 for others; without mimalloc (the device has none);
# libstdc++ and libgcc linked statically, libcudart and libcublas dynamically
# (the device has them). The binaries are stripped and packed as
# gpu-pack/pack.tar.xz (a few MiB). With --emulate it packs an emulator build
# (-DLLM_CUDA=EMULATE) the same way: CI rehearses gpu-check.sh with it. An
# existing build folder (--build-dir) is reused as configured (CI's Release build).
#
# Usage: scripts/gpu-pack.sh [--arch 90] [--emulate] [--build-dir DIR] [--out DIR]
#                            [--jobs N] [--max-mib 16]
# Prints the pack's size and the tracked tree's size; fails when the pack
# passes --max-mib or the tree passes 48 MiB.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

ARCH=90
EMULATE=0
BUILD=""
OUT=gpu-pack
JOBS=${GPU_PACK_JOBS:-$(nproc)}
MAX_MIB=16
while [[ $# -gt 0 ]]; do
  case "$1" in
    --arch) ARCH=${2:?--arch needs a list, e.g. 90 or 80,89,90}; shift 2 ;;
    --emulate) EMULATE=1; shift ;;
    --build-dir) BUILD=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    --jobs) JOBS=${2:?}; shift 2 ;;
    --max-mib) MAX_MIB=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "gpu-pack: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[[ -z "$BUILD" ]] && { if [[ $EMULATE -eq 1 ]]; then BUILD=build-emu; else BUILD=build-gpu-pack; fi; }
t0=$(date +%s)
say() { echo "gpu-pack: $* ($(( $(date +%s) - t0 )) s)"; }

# ------------------------------------------------------------- configure
# sm_90 alone is SASS + PTX (newer GPUs JIT the PTX); a list is SASS for
# each, with PTX for the last.
cuda_archs=""
IFS=, read -ra archs <<< "$ARCH"
for i in "${!archs[@]}"; do
  a=${archs[$i]}
  [[ "$a" =~ ^[0-9]+a?$ ]] || { echo "gpu-pack: bad --arch '$a'" >&2; exit 2; }
  if (( i + 1 < ${#archs[@]} )); then cuda_archs+="${a}-real;"; else cuda_archs+="$a"; fi
done
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  gen=(); command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  # No UCX and no image codecs: the pack's binaries need no library a bare GPU
  # machine may lack (libucx, libpng, libjpeg).
  common=(-DCMAKE_BUILD_TYPE=Release -DLLM_USE_MIMALLOC=OFF -DLLM_UCX=OFF -DLLM_IMAGE_CODECS=OFF -DLLM_BUILD_TESTS=ON -DLLM_BUILD_SAMPLES=ON
          "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc")
  if [[ $EMULATE -eq 1 ]]; then
    cmake "${gen[@]}" -B "$BUILD" "${common[@]}" -DLLM_CUDA=EMULATE >/dev/null
  else
    cmake "${gen[@]}" -B "$BUILD" "${common[@]}" -DLLM_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$cuda_archs" >/dev/null
  fi
  say "configured $BUILD"
elif [[ $EMULATE -eq 0 ]]; then
  # an existing GPU build folder follows --arch
  cmake -B "$BUILD" "-DCMAKE_CUDA_ARCHITECTURES=$cuda_archs" >/dev/null
fi
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt" | head -n 1; }
mode=$(cache LLM_CUDA)
if [[ $EMULATE -eq 1 && "$mode" != EMULATE ]] || [[ $EMULATE -eq 0 && "$mode" != ON ]]; then
  echo "gpu-pack: $BUILD is configured with LLM_CUDA=$mode" >&2; exit 1
fi
if [[ "$(cache LLM_BUILD_SAMPLES)" != ON ]]; then
  cmake -B "$BUILD" -DLLM_BUILD_SAMPLES=ON >/dev/null  # cuda-bench and llm-synth
fi

# ------------------------------------------------------------- build
say "building cuda-tests cuda-bench llm-synth in $BUILD (-j$JOBS)"
cmake --build "$BUILD" -j"$JOBS" --target cuda-tests cuda-bench llm-synth
say "built"

# ------------------------------------------------------------- stage
stage=$(mktemp -d "${TMPDIR:-/tmp}/gpu-pack.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin"
for b in cuda-tests cuda-bench llm-synth; do
  cp "$BUILD/bin/$b" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$b"
done

# One group per test file: the suites it defines (from its own binary, which
# the cuda-tests link built beside it), as a GoogleTest filter. Listing runs
# no test and needs no device.
# in order of worth: the kernels under everything, then the backend's
# layers; files not named here follow in their order
read -ra built < "$BUILD/cuda-test-files.txt"
files=()
for f in test_cuda_kernels test_cuda_quant test_cuda_backend test_cuda_graphs test_cuda_capi test_cuda_offload \
         test_cuda_families; do
  [[ " ${built[*]} " == *" $f "* ]] && files+=("$f")
done
for f in "${built[@]}"; do [[ " ${files[*]} " == *" $f "* ]] || files+=("$f"); done
: > "$stage/groups.tsv"
for f in "${files[@]}"; do
  suites=$("$BUILD/bin/$f" --gtest_list_tests | awk '/^[^ ]/ { s = $1; sub(/\.$/, "", s); print s }' | sort -u)
  [[ -n "$suites" ]] || { echo "gpu-pack: $f lists no tests" >&2; exit 1; }
  filter=$(echo "$suites" | sed 's/$/.*/' | paste -sd: -)
  printf '%s\t%s\t%s\n' "${f#test_cuda_}" "$f" "$filter" >> "$stage/groups.tsv"
done
# every test of cuda-tests is in exactly one group
all=$("$stage/bin/cuda-tests" --gtest_list_tests | grep -c '^  ')
grouped=0
while IFS=$'\t' read -r _ _ filter; do
  n=$("$stage/bin/cuda-tests" --gtest_list_tests "--gtest_filter=$filter" | grep -c '^  ' || true)
  grouped=$((grouped + n))
done < "$stage/groups.tsv"
if (( all != grouped )); then
  echo "gpu-pack: the groups hold $grouped tests, cuda-tests $all" >&2; exit 1
fi
say "$(wc -l < "$stage/groups.tsv") test groups, $all tests"

# GoogleTest for a build on the device (its CMake package, as installed here)
gtest_cfg=$(cache GTest_DIR)
if [[ -n "$gtest_cfg" && -f "$gtest_cfg/GTestConfig.cmake" ]]; then
  prefix=$(cd "$gtest_cfg/../../../.." && pwd)   # <prefix>/lib/<multiarch>/cmake/GTest
  libdir=${gtest_cfg%/cmake/GTest}
  rel=${libdir#"$prefix"/}
  mkdir -p "$stage/gtest/$rel/cmake" "$stage/gtest/include"
  cp -r "$gtest_cfg" "$stage/gtest/$rel/cmake/"
  cp "$libdir"/libgtest*.a "$libdir"/libgmock*.a "$stage/gtest/$rel/" 2>/dev/null || true
  cp -r "$prefix/include/gtest" "$stage/gtest/include/"
  [[ -d "$prefix/include/gmock" ]] && cp -r "$prefix/include/gmock" "$stage/gtest/include/"
  # its targets file checks that every library it names exists
  for lib in $(grep -ho 'lib[a-z_]*\.a' "$stage/gtest/$rel/cmake/GTest/"*.cmake | sort -u); do
    [[ -f "$stage/gtest/$rel/$lib" ]] || : > "$stage/gtest/$rel/$lib"
  done
fi

# ------------------------------------------------------------- stamp
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=""
git diff --quiet HEAD -- 2>/dev/null || dirty=" (with uncommitted changes)"
nvcc_v=""
[[ $EMULATE -eq 0 ]] && nvcc_v=$( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | sed -n 's/.*release \([0-9.]*\).*/\1/p')
{
  echo "commit: $commit$dirty"
  echo "subject: $(git log -1 --format=%s 2>/dev/null | cut -c1-120)"
  echo "built: $(date -u '+%F %T') UTC on $(uname -m), $(nproc) cores"
  echo "mode: $([[ $EMULATE -eq 1 ]] && echo emulator || echo gpu)"
  echo "flags: LLM_CUDA=$mode CMAKE_BUILD_TYPE=$(cache CMAKE_BUILD_TYPE) CMAKE_CUDA_ARCHITECTURES=$(cache CMAKE_CUDA_ARCHITECTURES) LLM_USE_MIMALLOC=$(cache LLM_USE_MIMALLOC) mimalloc=$([[ -n "$(cache LLM_MIMALLOC_LIB)" && "$(cache LLM_MIMALLOC_LIB)" != *NOTFOUND ]] && echo linked || echo no) LLM_SANITIZE=$(cache LLM_SANITIZE) CMAKE_EXE_LINKER_FLAGS=$(cache CMAKE_EXE_LINKER_FLAGS)"
  echo "toolchain: $(cache CMAKE_CXX_COMPILER) $("$(cache CMAKE_CXX_COMPILER)" -dumpfullversion 2>/dev/null), nvcc ${nvcc_v:-none (emulator)}, glibc $(ldd --version 2>/dev/null | head -n1 | awk '{print $NF}')"
  echo "needs: $(ldd "$stage/bin/cuda-tests" 2>/dev/null | awk '/=>/ {print $1}' | grep -E 'cuda|cublas' | paste -sd' ' -)"
  echo "groups: $(cut -f1 "$stage/groups.tsv" | paste -sd' ' -)"
  (cd "$stage" && find bin -type f | sort | while read -r f; do
     echo "file: $f $(stat -c %s "$f") $(sha256sum "$f" | cut -c1-16)"; done)
} > "$stage/STAMP"

# ------------------------------------------------------------- pack
mkdir -p "$OUT"
rm -f "$OUT"/pack.tar.xz "$OUT"/STAMP
tar -C "$stage" --owner=0 --group=0 --numeric-owner -cf - STAMP groups.tsv bin $( [[ -d "$stage/gtest" ]] && echo gtest) |
  xz -6 -T"$JOBS" > "$OUT/pack.tar.xz"
cp "$stage/STAMP" "$OUT/STAMP"
echo "pack: $(sha256sum "$OUT/pack.tar.xz" | cut -c1-16)" >> "$OUT/STAMP"
bytes=$(stat -c %s "$OUT/pack.tar.xz")
say "packed"
echo
cat "$OUT/STAMP"
echo
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "pack size: $mib MiB ($bytes bytes, $OUT/pack.tar.xz; limit $MAX_MIB MiB)"
bash scripts/tree-size.sh 48
if (( bytes > MAX_MIB * 1048576 )); then
  echo "gpu-pack: the pack passes $MAX_MIB MiB" >&2; exit 1
fi
