#!/usr/bin/env bash
# Runs llama.cpp's own server test suite (tools/server/tests/unit in the
# llama.cpp source the llama-cpp-python sdist carries) against llm-server,
# through launcher.py (the only adapted part: models come from this machine,
# not from Hugging Face). Not part of CI: it downloads the sdist (~75 MB) and
# takes ~10 minutes. Prints pytest's summary and the failures grouped by
# reason (summarize.py, from pytest's JUnit XML report).
#
#   tests/llamacpp-server/run.sh [pytest args...]     e.g. run.sh unit/test_completion.py
#
# Environment: LLM_SERVER_BIN (default build/bin/llm-server), LLAMA_CPP_PYTHON
# (sdist version, default 0.3.36), WORK (default build/llamacpp-server).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=${LLAMA_CPP_PYTHON:-0.3.36}
work=${WORK:-$repo/build/llamacpp-server}
mkdir -p "$work"
sdist="$work/llama_cpp_python-$version.tar.gz"
[ -f "$sdist" ] || pip download --quiet --no-binary :all: --no-deps "llama-cpp-python==$version" -d "$work"
tests="$work/llama_cpp_python-$version/vendor/llama.cpp/tools/server/tests"
# The suite, and what its tests read beside it: chat templates, the media
# file of the vision and security tests.
src="llama_cpp_python-$version/vendor/llama.cpp"
[ -d "$work/$src/models/templates" ] ||
  tar -C "$work" -xzf "$sdist" "$src/tools/server/tests" "$src/models/templates" "$src/tools/mtmd/test-1.jpeg"
venv="$work/venv"
if [ ! -x "$venv/bin/pytest" ]; then
  python3 -m venv "$venv"
  # requirements.txt pins old versions; the newest of each serves the suite.
  "$venv/bin/pip" install --quiet pytest aiohttp requests wget numpy openai prometheus-client filelock
fi
export LLM_SERVER_BIN=${LLM_SERVER_BIN:-$repo/build/bin/llm-server}
export LLAMA_SERVER_BIN_PATH="$here/launcher.py"
export LAUNCHER_LOG="$work/launches.jsonl"
rm -f "$LAUNCHER_LOG"
cd "$tests"
set +e
"$venv/bin/python" -m pytest -q -p no:cacheprovider --junitxml="$work/last-run.xml" "${@:-unit/}" > "$work/last-run.log" 2>&1
set -e
tail -n 1 "$work/last-run.log"
python3 "$here/replay.py" "$LAUNCHER_LOG" "$work/last-run.xml" "$work/refusals.json"
python3 "$here/summarize.py" "$work/last-run.xml" "$work/refusals.json"
