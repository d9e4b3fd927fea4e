#!/usr/bin/env bash
# Perplexity of llmrt against llama.cpp on the same quantized files and text:
# a synthesized model (llm-synth, F16) is given an importance matrix by
# llama.cpp's llama-imatrix, quantized by its llama-quantize to each type, and
# both llm-perplexity and llama-perplexity score the same text at the same
# context (both split and score chunks the same way: samples/llm_perplexity.cpp).
# Prints a markdown table: type, file MiB, llmrt PPL, llama.cpp PPL, relative
# difference. Accuracy, not speed: the figures do not depend on the load.
#
#   bench/quant_ppl_peer.sh [--shape llama-3.2-1b] [--model F16.gguf]
#       [--text FILE] [--ctx 512] [--threads 1] [--work DIR] [TYPE ...]
#
# Defaults: the 1B shape, tests/data/gemma3_ppl.txt's first 1000 bytes (two
# chunks of 512 with llm-synth's vocabulary), the types of issue #32's
# acceptance list. With --model, that F16 file is quantized instead of a
# synthesized one (a real model gives meaningful perplexities; a random one
# gives about the vocabulary size, still a token-by-token comparison).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
shape=llama-3.2-1b model="" text="" ctx=512 threads=1 work=/tmp/llmrt-quant-ppl
types=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shape) shape=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) types+=("$1"); shift ;;
  esac
done
[[ ${#types[@]} -gt 0 ]] || types=(IQ4_XS Q3_K_M Q2_K IQ3_XXS IQ2_XS)
bin="${LLMRT_BIN:-$root/build/bin}"
peer="$(bash "$here/peer/build_llamacpp.sh")"
mkdir -p "$work"
if [[ -z "$text" ]]; then text="$work/text.txt"; head -c 1000 "$root/tests/data/gemma3_ppl.txt" >"$text"; fi
if [[ -z "$model" ]]; then
  model="$work/$shape-f16.gguf"
  [[ -f "$model" ]] || "$bin/llm-synth" --shape "$shape" --type f16 --out "$model" --threads "$threads" >&2
fi
imatrix="$work/$(basename "$model" .gguf).imatrix.gguf"
# IQ2/IQ1 types need an importance matrix (llama-quantize refuses them
# without one); four chunks are enough to exercise it.
[[ -f "$imatrix" ]] || "$peer/llama-imatrix" -m "$model" -f "$root/tests/data/gemma3_ppl.txt" -c "$ctx" --chunks 4 \
  -t "$threads" --no-repack -o "$imatrix" >"$work/imatrix.log" 2>&1
ppl_of() { grep -oE '(PPL = |^perplexity: )[0-9.]+' "$1" | tail -1 | grep -oE '[0-9.]+$'; }
echo "| type | file MiB | llmrt PPL | llama.cpp PPL | llmrt / llama.cpp - 1 |"
echo "| --- | --- | --- | --- | --- |"
for t in "${types[@]}"; do
  q="$work/$(basename "$model" .gguf)-$t.gguf"
  [[ -f "$q" ]] || "$peer/llama-quantize" --imatrix "$imatrix" "$model" "$q" "$t" "$threads" >"$q.quantize.log" 2>&1
  "$bin/llm-perplexity" -m "$q" -f "$text" -c "$ctx" -t "$threads" >"$q.llmrt.log" 2>&1
  # --no-repack: llama.cpp's AMX/repacked buffer types crash on this VM; the
  # perplexity is the same math either way.
  "$peer/llama-perplexity" -m "$q" -f "$text" -c "$ctx" -t "$threads" --no-repack >"$q.llamacpp.log" 2>&1
  a=$(ppl_of "$q.llmrt.log") b=$(ppl_of "$q.llamacpp.log")
  mib=$(( $(stat -L -c %s "$q") / 1048576 ))
  rel=$(python3 -c "print(f'{$a / $b - 1:+.5%}')")
  echo "| $t | $mib | $a | $b | $rel |"
done
