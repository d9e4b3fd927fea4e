#!/usr/bin/env bash
# tree-size.sh [LIMIT_MIB]: the size of the tracked tree (what a GPU machine
# receives: tracked files, plus untracked files git does not ignore, must stay
# under 64 MiB). Prints both figures; fails when the tracked tree passes
# LIMIT_MIB (default 48: room under the 64 for the carried pack, the
# untracked files of a working session and growth). Keep it well under 40:
# large reference data goes into tests/data/*/*.tar.xz (cmake/LlmHelpers.cmake,
# llm_unpack_test_data).
set -euo pipefail
cd "$(dirname "$0")/.."
limit_mib=${1:-48}
# sizes of the files as they are in the working tree (a deleted file counts 0)
sum() { xargs -0 -r stat -c %s -- 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
tracked=$(git ls-files -z | sum)
travels=$(git ls-files -z -c -o --exclude-standard | sum)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "tracked tree: $(mib "$tracked") MiB ($tracked bytes); with untracked, not ignored files: $(mib "$travels") MiB; limit $limit_mib MiB"
if (( tracked > limit_mib * 1048576 )); then
  echo "tree-size: the tracked tree passes $limit_mib MiB; the largest tracked files:" >&2
  git ls-files -z | xargs -0 -r stat -c '%s %n' -- 2>/dev/null | sort -rn | head -n 15 >&2
  echo "store large reference data compressed (tests/data/*/*.tar.xz, unpacked at configure time)" >&2
  exit 1
fi
