// M-RoPE positions (ModelConfig::mrope_sections; Qwen2-VL's text model) of
// a sequence's KV slots, as llama.cpp's multimodal library numbers them.
//
// Slots stay one per token (the KV cache, block tables and n_ctx count
// them); the RoPE positions differ from them after an image. An image span
// of nx x ny merged cells starting at slot s, whose first position is p0,
// gives its cell i (row-major) the triple
//     (t, h, w) = (p0, p0 + i / nx, p0 + i % nx)
// and takes max(nx, ny) positions, so every later slot's position moves by
// max(nx, ny) - nx·ny; a text slot j has (p, p, p), p = j + the moves of
// the spans before it. A generated token continues from the last position.
//
//   slots      0  1  2 | 3  4  5  6  7  8 | 9 10      nx 3, ny 2
//   t          0  1  2 | 3  3  3  3  3  3 | 6  7
//   h          0  1  2 | 3  3  3  4  4  4 | 6  7
//   w          0  1  2 | 3  4  5  3  4  5 | 6  7
//
// Spans with nx == 0 (a model without M-RoPE) take their n positions.
#pragma once

#include <cstdint>
#include <span>

#include "core/sequence.h"

namespace llm {

// out: (n, 3) the (t, h, w) of slots [first, first + n); spans in slot order.
inline void MropePositions(std::span<const ImageSpan> spans, int32_t first, int32_t n, int32_t* out) {
  size_t k = 0;
  int64_t shift = 0;  // the moves of the spans wholly before the slot (<= 0)
  for (int32_t j = first; j < first + n; ++j, out += 3) {
    for (; k < spans.size() && int64_t{spans[k].first} + spans[k].n <= j; ++k)
      if (spans[k].nx > 0) shift += int64_t{spans[k].n_pos} - spans[k].n;
    if (k < spans.size() && spans[k].nx > 0 && j >= spans[k].first) {
      const int32_t p0 = static_cast<int32_t>(spans[k].first + shift), i = j - spans[k].first;
      out[0] = p0;
      out[1] = p0 + i / spans[k].nx;
      out[2] = p0 + i % spans[k].nx;
    } else {
      out[0] = out[1] = out[2] = static_cast<int32_t>(j + shift);
    }
  }
}

}  // namespace llm
