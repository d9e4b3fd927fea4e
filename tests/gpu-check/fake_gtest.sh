#!/usr/bin/env bash
# A stand-in for a GoogleTest binary with planted faults, for the test of
# scripts/gpu-check.sh itself (check_gpu_check.sh): it prints what GoogleTest
# prints for --gtest_list_tests and --gtest_filter (positive patterns, then
# '-' and negative ones, ':'-separated, '*' wildcards), and its tests
#   Fake.Passes         passes
#   Fake.Fails          fails (exit 1 at the end, as GoogleTest)
#   FakeCrash.Crashes   dies of SIGSEGV
#   FakeCrash.AfterCrash  passes (runs only when the group resumes)
#   FakeHang.Hangs      sleeps far past any cap
#   FakeHang.AfterHang  passes (runs only when the group resumes)
set -u
tests=(Fake.Passes Fake.Fails FakeCrash.Crashes FakeCrash.AfterCrash FakeHang.Hangs FakeHang.AfterHang)
filter="*"
list=0
for a in "$@"; do
  case "$a" in
    --gtest_list_tests) list=1 ;;
    --gtest_filter=*) filter=${a#--gtest_filter=} ;;
  esac
done
pos=${filter%%-*}; neg=""
[[ "$filter" == *-* ]] && neg=${filter#*-}
[[ -z "$pos" ]] && pos="*"
matches() {  # matches NAME PATTERNS
  local p
  IFS=: read -ra ps <<< "$2"
  for p in "${ps[@]}"; do [[ -n "$p" && "$1" == $p ]] && return 0; done
  return 1
}
selected=()
for t in "${tests[@]}"; do
  matches "$t" "$pos" || continue
  [[ -n "$neg" ]] && matches "$t" "$neg" && continue
  selected+=("$t")
done
if [[ $list -eq 1 ]]; then
  suite=""
  for t in "${selected[@]}"; do
    [[ "${t%%.*}" != "$suite" ]] && { suite=${t%%.*}; echo "$suite."; }
    echo "  ${t#*.}"
  done
  exit 0
fi
echo "[==========] Running ${#selected[@]} tests."
failed=()
for t in "${selected[@]}"; do
  echo "[ RUN      ] $t"
  case "$t" in
    *.Fails) echo "fake_gtest.sh:1: Failure (planted)"; echo "[  FAILED  ] $t (1 ms)"; failed+=("$t") ;;
    *.Crashes) kill -SEGV $$ ;;
    *.Hangs) sleep 1000 ;;
    *) echo "[       OK ] $t (0 ms)" ;;
  esac
done
echo "[==========] ${#selected[@]} tests ran."
echo "[  PASSED  ] $(( ${#selected[@]} - ${#failed[@]} )) tests."
if (( ${#failed[@]} > 0 )); then
  echo "[  FAILED  ] ${#failed[@]} tests, listed below:"
  for t in "${failed[@]}"; do echo "[  FAILED  ] $t"; done
  exit 1
fi
exit 0
