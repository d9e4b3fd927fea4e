#!/usr/bin/env bash
# cuda-mutants.sh: the mutation check of the CUDA tests (issue 17). Applies,
# one at a time, deliberately broken variants of the real kernels and
# backend (scripts/mutants/mutants.py: a missing __syncthreads, an off-by-one
# in the block-table lookup, a wrong GQA head mapping, a swapped mma fragment
# index, a split-K combine without rescaling, a graph replay reading a
# per-step value captured at capture time), builds, runs the CUDA tests
# (ctest label `cuda`) and reports, per mutant, which tests caught it. A
# mutant no test catches is SURVIVED, and makes the exit status non-zero (as
# does a mutant that no longer applies or builds).
#
# Your tree is never edited: the mutants are applied to a scratch copy of it
# (tracked and untracked-but-not-ignored files, uncommitted edits included),
# <work>/src, with its own build directory, both kept between runs so later
# runs rebuild only what changed. Each mutated file is restored from your
# tree after its mutant (with a fresh mtime, so the next build recompiles it).
#
# Usage: scripts/cuda-mutants.sh [--only NAME,NAME..] [--tests REGEX] [--work DIR] [--build-dir DIR]
#                                [--cmake-args "ARGS"] [--jobs N] [--test-timeout S]
#                                [--compile-only] [--list]
#
#   --only        these mutants only (comma-separated; --list names them)
#   --tests       only the ctest entries matching REGEX (ctest -R; names are
#                 test_foo.Suite.Test), e.g. to check one mutant quickly
#   --work        scratch folder (default build-mutants/ in the tree: ignored by git)
#   --build-dir   build folder (default <work>/build-emu), configured with
#                 --cmake-args (default "-DCMAKE_BUILD_TYPE=Release -DLLM_CUDA=EMULATE")
#   --compile-only  no tests: apply each mutant and compile the translation
#                 units it touches with the build's own compile commands
#                 (checks that every mutant applies and still compiles, e.g.
#                 with --cmake-args "-DLLM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90"
#                 on a machine with nvcc and no GPU)
#   --list        the mutants and what each breaks
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MUT="$ROOT/scripts/mutants/mutants.py"
WORK="$ROOT/build-mutants"
BUILD=""
CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Release -DLLM_CUDA=EMULATE"
JOBS=$(nproc)
TEST_TIMEOUT=1200
ONLY=""
TESTS=""
COMPILE_ONLY=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) ONLY=${2:?--only needs names}; shift 2 ;;
    --tests) TESTS=${2:?--tests needs a regex}; shift 2 ;;
    --work) WORK=${2:?--work needs a path}; shift 2 ;;
    --build-dir) BUILD=${2:?--build-dir needs a path}; shift 2 ;;
    --cmake-args) CMAKE_ARGS=${2?--cmake-args needs a string}; shift 2 ;;
    --jobs) JOBS=${2:?--jobs needs a number}; shift 2 ;;
    --test-timeout) TEST_TIMEOUT=${2:?--test-timeout needs seconds}; shift 2 ;;
    --compile-only) COMPILE_ONLY=1; shift ;;
    --list)
      for m in $(python3 "$MUT" --list); do printf '%-26s %s\n' "$m" "$(python3 "$MUT" --describe "$m")"; done
      exit 0 ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "cuda-mutants: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$WORK" || exit 2
WORK=$(cd "$WORK" && pwd)
SRC="$WORK/src"
[[ -z "$BUILD" ]] && BUILD="$WORK/build-emu"
LOGS="$WORK/logs"
mkdir -p "$LOGS"

if [[ -n "$ONLY" ]]; then
  MUTANTS=${ONLY//,/ }
else
  MUTANTS=$(python3 "$MUT" --list) || exit 2
fi

# ---------------------------------------------------------------- scratch copy
# The files git would commit (tracked, and untracked ones not ignored), with
# their mtimes, so an unchanged file does not rebuild. Files deleted from the
# tree since the last run are removed from the copy.
echo "== scratch copy of $ROOT in $SRC"
mkdir -p "$SRC"
( cd "$ROOT" && git ls-files -co --exclude-standard -z ) > "$WORK/files.lst" || { echo "cuda-mutants: git ls-files failed" >&2; exit 2; }
( cd "$ROOT" && tar --null -T "$WORK/files.lst" -cf - ) | ( cd "$SRC" && tar -xpf - ) || { echo "cuda-mutants: copy failed" >&2; exit 2; }
( cd "$SRC" && find . -type f ! -path './.git/*' -printf '%P\0' ) | sort -z > "$WORK/have.lst"
sort -z "$WORK/files.lst" > "$WORK/want.lst"
comm -z -23 "$WORK/have.lst" "$WORK/want.lst" | ( cd "$SRC" && xargs -0 -r rm -f )
# Reference data the tests look for beside the tree (../shared), when present.
[[ -d "$ROOT/../shared" && ! -e "$WORK/shared" ]] && ln -s "$(cd "$ROOT/../shared" && pwd)" "$WORK/shared"

restore() {  # restore FILE..: your tree's version, with a fresh mtime
  local f
  for f in "$@"; do
    cp "$ROOT/$f" "$SRC/$f" && touch "$SRC/$f"
  done
}
CURRENT_FILES=()
trap 'restore "${CURRENT_FILES[@]}"' EXIT INT TERM

# ---------------------------------------------------------------- configure
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  echo "== configure $BUILD ($CMAKE_ARGS)"
  # shellcheck disable=SC2086  # CMAKE_ARGS is a list of arguments
  cmake -S "$SRC" -B "$BUILD" $CMAKE_ARGS -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$LOGS/configure.log" 2>&1 ||
    { echo "cuda-mutants: configure failed, see $LOGS/configure.log" >&2; exit 2; }
fi

declare -A RESULT CAUGHT_BY
FAILED=0

if [[ $COMPILE_ONLY -eq 1 ]]; then
  # ---------------------------------------------------------------- compile only
  for m in $MUTANTS; do
    mapfile -t CURRENT_FILES < <(python3 "$MUT" --files "$m")
    if ! python3 "$MUT" --apply "$m" --root "$SRC" > "$LOGS/$m.log" 2>&1; then
      RESULT[$m]="DOES-NOT-APPLY"; FAILED=1
    else
      RESULT[$m]="COMPILES"
      while read -r unit; do
        echo "== $m: compiling $unit"
        if ! python3 "$MUT" --compile "$SRC/$unit" --db "$BUILD/compile_commands.json" >> "$LOGS/$m.log" 2>&1; then
          RESULT[$m]="COMPILE-FAILED($unit)"; FAILED=1
        fi
      done < <(python3 "$MUT" --units "$m")
    fi
    restore "${CURRENT_FILES[@]}"
    CURRENT_FILES=()
    printf '%-26s %s\n' "$m" "${RESULT[$m]}"
  done
else
  # ---------------------------------------------------------------- build and test
  # The CUDA test executables (test_cuda_*), built before ctest can list
  # their cases: the GoogleTest cases are discovered at test time
  # (DISCOVERY_MODE PRE_TEST), one ctest entry test_foo.Suite.Test each.
  mapfile -t TARGETS < <(cmake --build "$BUILD" --target help | sed -n -e 's/^\.\.\. \(test_cuda_[A-Za-z0-9_]*\).*/\1/p' -e 's/^\(test_cuda_[A-Za-z0-9_]*\): .*/\1/p' | sort -u)
  [[ ${#TARGETS[@]} -eq 0 ]] && { echo "cuda-mutants: no CUDA test targets in $BUILD" >&2; exit 2; }
  SELECT=(-L cuda)
  [[ -n "$TESTS" ]] && SELECT+=(-R "$TESTS")
  build() { cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}"; }
  run_tests() { ctest --test-dir "$BUILD" "${SELECT[@]}" -j"$JOBS" --output-on-failure --timeout "$TEST_TIMEOUT"; }

  echo "== baseline: build and run ${TARGETS[*]}, unmutated"
  build > "$LOGS/baseline-build.log" 2>&1 || { echo "cuda-mutants: the unmutated tree does not build, see $LOGS/baseline-build.log" >&2; exit 2; }
  run_tests > "$LOGS/baseline-test.log" 2>&1 || { echo "cuda-mutants: the unmutated tree fails its CUDA tests, see $LOGS/baseline-test.log" >&2; exit 2; }
  # A test that skips (no emulator, no device) catches nothing: stop rather than report survivors.
  if grep -q '\[  SKIPPED \]' "$LOGS/baseline-test.log" || ! grep -q '\[  PASSED  \]' "$LOGS/baseline-test.log"; then
    ctest --test-dir "$BUILD" "${SELECT[@]}" -V > "$LOGS/baseline-test.log" 2>&1
    if grep -q '\[  SKIPPED \]' "$LOGS/baseline-test.log"; then
      echo "cuda-mutants: CUDA tests skip in this build (no emulator, no device): nothing could be caught." >&2
      echo "  Build with -DLLM_CUDA=EMULATE (or on a GPU); see $LOGS/baseline-test.log" >&2
      exit 2
    fi
  fi

  for m in $MUTANTS; do
    mapfile -t CURRENT_FILES < <(python3 "$MUT" --files "$m")
    echo "== $m: $(python3 "$MUT" --describe "$m")"
    if ! python3 "$MUT" --apply "$m" --root "$SRC" > "$LOGS/$m.log" 2>&1; then
      RESULT[$m]="DOES-NOT-APPLY"; FAILED=1
    elif ! build >> "$LOGS/$m.log" 2>&1; then
      RESULT[$m]="BUILD-FAILED"; FAILED=1
    elif run_tests >> "$LOGS/$m.log" 2>&1; then
      RESULT[$m]="SURVIVED"; FAILED=1
    else
      RESULT[$m]="CAUGHT"
      # ctest's failing executables, then the GoogleTest cases that failed in them
      tests=$(sed -n '/The following tests FAILED:/,$p' "$LOGS/$m.log" | sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\).*/\1/p' | sort -u | tr '\n' ' ')
      cases=$(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_/]*\.[A-Za-z0-9_./]*\).*/\1/p' "$LOGS/$m.log" | sort -u | head -8 | tr '\n' ' ')
      CAUGHT_BY[$m]="${tests:-?}${cases:+: $cases}"
    fi
    restore "${CURRENT_FILES[@]}"
    CURRENT_FILES=()
    printf '   %s %s\n' "${RESULT[$m]}" "${CAUGHT_BY[$m]:-}"
  done
  # Leave the build matching the tree again (the last mutant's objects are stale).
  build > "$LOGS/final-build.log" 2>&1
fi

echo
echo "==================== cuda-mutants summary (logs: $LOGS)"
for m in $MUTANTS; do
  printf '%-26s %-22s %s\n' "$m" "${RESULT[$m]:-NOT-RUN}" "${CAUGHT_BY[$m]:-}"
done
exit $FAILED
