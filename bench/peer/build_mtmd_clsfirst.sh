#!/usr/bin/env bash
# Builds a small library that, preloaded (LD_PRELOAD), gives llama-cpp-python's
# multimodal library (libmtmd) the LLaVA graph with CLIP's class token first,
# for tools/vision_reference.py's and vision_prompt_reference.py's LLaVA-style
# (CLIP + MLP, projector type "mlp") reference:
#
#   tools/mtmd/models/llava.cpp concatenates a CLIP tower's class embedding
#   AFTER the patch embeddings, while clip.cpp still fills the positions
#   0..N and picks the rows 1..N as for a class token FIRST (CLIP's layout,
#   and libmtmd's own before its graph refactor): every patch gets its
#   neighbour's position row, patch 0's output is dropped and the class
#   token's output is fed to the text model. Reported upstream as
#   ggml-org/llama.cpp issue 25814, fixed by pull request 25844 (not merged
#   in 0.3.36) by swapping the concat's operands; this script applies that
#   swap. Towers without a class embedding (SigLIP: Gemma 3, Idefics3) are
#   unaffected.
#
# Only models/llava.cpp is compiled (from the sdist's source, the swap
# applied), into libmtmd_llava_clsfirst.so beside LIBDIR's libraries: it
# defines clip_graph_llava's build() and its vtable, which libmtmd reaches
# through its GOT, so a preloaded copy takes the place of libmtmd's own.
#
# Usage: bench/peer/build_mtmd_clsfirst.sh LIBDIR [version]
#   LIBDIR: the folder build_ggml_cpu_exactgelu.sh printed. Then run the
#   reference scripts with LD_PRELOAD="LIBDIR/libmtmd_llava_clsfirst.so".
set -euo pipefail
lib="$(cd "$1" && pwd)"
version="${2:-0.3.36}"
here="$(cd "$(dirname "$0")" && pwd)"
vendor="$here/.cache/llama_cpp_python-$version/vendor/llama.cpp"
work="$here/.cache/mtmd-$version-clsfirst"
[[ -f "$vendor/tools/mtmd/models/llava.cpp" ]] || { echo "no $vendor/tools/mtmd: run build_ggml_cpu_exactgelu.sh first" >&2; exit 1; }
mkdir -p "$work"
cp "$vendor/tools/mtmd/models/llava.cpp" "$work/llava.cpp"
before='inp = ggml_concat(ctx0, inp, model.class_embedding, 1);'
grep -qF "$before" "$work/llava.cpp" || { echo "the class-token concat was not found in models/llava.cpp" >&2; exit 1; }
sed -i 's/inp = ggml_concat(ctx0, inp, model\.class_embedding, 1);/inp = ggml_concat(ctx0, model.class_embedding, inp, 1);  \/\/ llmrt: class token first (upstream PR 25844)/' "$work/llava.cpp"
grep -qF 'ggml_concat(ctx0, model.class_embedding, inp, 1)' "$work/llava.cpp"
nice -n 19 g++ -std=c++17 -O2 -fPIC -shared -DNDEBUG -DLLAMA_SHARED \
  -I "$vendor/tools/mtmd" -I "$vendor/tools/mtmd/models" -I "$vendor/include" -I "$vendor/ggml/include" \
  "$work/llava.cpp" -o "$lib/libmtmd_llava_clsfirst.so" -L "$lib" -lmtmd -lggml -lggml-base -Wl,-rpath,"$lib"
if ! grep -q "PR 25844" "$lib/llmrt-oracle.txt"; then
  echo "; for LLaVA-style files, libmtmd_llava_clsfirst.so (bench/peer/build_mtmd_clsfirst.sh) preloaded: the class token first in models/llava.cpp (upstream PR 25844)" >> "$lib/llmrt-oracle.txt"
fi
echo "$lib/libmtmd_llava_clsfirst.so"
