#!/usr/bin/env bash
# Builds and tests the Rust, Go, C# and Python bindings (and the C++ wrappers
# in include/llm.hpp) against libllmrt.
#
#   bash bindings/ci.sh            # builds the library into build-bind/ first
#   LLMRT_LIB_DIR=/path/lib bash bindings/ci.sh   # uses that library instead
#
# Installs golang-go / mono (apt) when missing; cargo must be installed
# (rustup; >= 1.77). Runs every suite even after a failure, ends with the
# line "N passed, N failed" (suites) and exits non-zero if any failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
build=${LLMRT_BIND_BUILD:-$repo/build-bind}
passed=0
failed=0
failures=()

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== apt-get install ${missing[*]}"
  as_root apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}"
}

suite() { # name command...
  local name=$1; shift
  echo "== $name"
  if "$@"; then
    echo "-- $name: ok"; passed=$((passed + 1))
  else
    echo "-- $name: FAILED"; failed=$((failed + 1)); failures+=("$name")
  fi
}

# ------------------------------------------------------------ the library
if [ -z "${LLMRT_LIB_DIR:-}" ]; then
  echo "== building libllmrt into $build"
  if ! { cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLM_CUDA=OFF >/dev/null &&
         cmake --build "$build" -j"$(nproc)" --target llmrt >/dev/null; }; then
    echo "cannot build libllmrt"; echo "0 passed, 5 failed"; exit 1
  fi
  export LLMRT_LIB_DIR=$build/lib
fi
[ -e "$LLMRT_LIB_DIR/libllmrt.so" ] || { echo "no libllmrt.so in $LLMRT_LIB_DIR"; echo "0 passed, 5 failed"; exit 1; }
export LLMRT_INCLUDE_DIR=${LLMRT_INCLUDE_DIR:-$repo/include}
export LLMRT_GOLDEN=${LLMRT_GOLDEN:-$here/testdata/golden-greedy.tsv}
export LD_LIBRARY_PATH=$LLMRT_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ------------------------------------------------------------------ Rust
rust_suite() {
  # rustup installs under ~/.cargo/bin, which a non-login shell may not have on PATH.
  command -v cargo >/dev/null || [ ! -x "$HOME/.cargo/bin/cargo" ] || export PATH="$HOME/.cargo/bin:$PATH"
  command -v cargo >/dev/null || { echo "cargo not found (install a Rust toolchain >= 1.77)"; return 1; }
  (cd "$here/rust" && cargo build --offline --all-targets && cargo test --offline)
}

# -------------------------------------------------------------------- Go
go_suite() {
  apt_install golang-go gcc || return 1
  (cd "$here/go" &&
    export CGO_ENABLED=1 GOFLAGS=-mod=mod GOPROXY=off \
           CGO_CFLAGS="-I$LLMRT_INCLUDE_DIR" \
           CGO_LDFLAGS="-L$LLMRT_LIB_DIR -Wl,-rpath,$LLMRT_LIB_DIR" &&
    go vet ./... && go build ./... && go test -count=1 -race -v ./...)
}

# -------------------------------------------------------------------- C#
csharp_suite() {
  apt_install mono-mcs mono-runtime || return 1
  local out=$build/csharp
  mkdir -p "$out" &&
  ln -sf "$LLMRT_LIB_DIR/libllmrt.so" "$out/libllmrt.so" &&
  mcs -nologo -warnaserror -target:library -out:"$out/Llmrt.dll" -r:System.dll -r:System.Core.dll "$here"/csharp/src/*.cs &&
  mcs -nologo -out:"$out/Llmrt.Tests.exe" -r:"$out/Llmrt.dll" -r:System.dll -r:System.Core.dll "$here/csharp/tests/Tests.cs" &&
  mcs -nologo -out:"$out/Stream.exe" -r:"$out/Llmrt.dll" "$here/csharp/samples/Stream/Program.cs" &&
  (cd "$here/csharp" && timeout 300 mono --debug "$out/Llmrt.Tests.exe")
}

# ------------------------------------------- C++ wrappers (include/llm.hpp)
cpp_suite() {
  local out=$build/cpp
  mkdir -p "$out" &&
  ${CXX:-c++} -std=c++20 -Wall -Wextra -Werror -I"$LLMRT_INCLUDE_DIR" "$repo/tests/test_llm_hpp.cpp" -o "$out/test_llm_hpp" \
    -L"$LLMRT_LIB_DIR" -lllmrt -Wl,-rpath,"$LLMRT_LIB_DIR" &&
  ${CXX:-c++} -std=c++20 -Wall -Wextra -Werror -I"$LLMRT_INCLUDE_DIR" "$repo/samples/cpp_stream.cpp" -o "$out/cpp_stream" \
    -L"$LLMRT_LIB_DIR" -lllmrt -Wl,-rpath,"$LLMRT_LIB_DIR" &&
  "$out/test_llm_hpp" && "$out/cpp_stream" "Once upon a time" 20 >/dev/null
}

# ---------------------------------------------------------------- Python
python_suite() {
  # A fresh virtual environment, the package installed with pip around the
  # library built above (LLMRT_PREBUILT_LIB: no second compile), then its
  # pytest suite run from outside the source tree (the installed package).
  local venv=$build/pyvenv
  python3 -m venv --help >/dev/null 2>&1 || apt_install python3-venv || return 1
  rm -rf "$venv" && python3 -m venv "$venv" &&
  LLMRT_PREBUILT_LIB="$LLMRT_LIB_DIR/libllmrt.so" "$venv/bin/pip" install --quiet "$here/python[test]" &&
  (cd "$build" && unset LLMRT_LIB_DIR &&
   "$venv/bin/python" -c 'import llmrt._lib as l, sys; p = l.lib._name; print("llmrt loads", p); sys.exit("site-packages" not in p)' &&
   "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/python/tests")
}

suite rust rust_suite
suite go go_suite
suite csharp csharp_suite
suite cpp cpp_suite
suite python python_suite

[ $failed -eq 0 ] || echo "failed suites: ${failures[*]}"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
