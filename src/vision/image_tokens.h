// How a projector family's pictures sit in the text (as llama.cpp's
// multimodal library lays them out): the marker a chat template writes
// where a picture stands, the text placed before and after the picture's
// soft tokens, and the text model architecture the projector serves.
//
// Idefics3 (SmolVLM) tiles a picture (vision/image_prep.h) and spells the
// grid out around the tiles' soft tokens:
//   per tile, row r and column c from 1:  <fake_token_around_image><row_r_col_c> [tile]
//   after each row but the last:          "\n"
//   then the overview:                    "\n\n" <fake_token_around_image> <global-img> [overview]
//                                         <fake_token_around_image>
// where the tile prefix is tokenized (special tokens parsed) and the others
// are single tokens found by their text (`*_pieces`).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/vision_config.h"

namespace llm {

struct ImageTokens {
  std::string_view marker;  // what the template writes per picture
  std::string_view begin;   // before the soft tokens (a special token)
  std::string_view end;     // after them
  std::string_view arch;    // the text model's general.architecture
  // the picture's positions attend to each other both ways (Gemma 3), or
  // causally as text does (llama.cpp's mtmd_decode_use_non_causal)
  bool both_ways = false;
  // tiled families (Idefics3) only
  bool tiled = false;
  std::string_view row_end_piece;                      // after each row of tiles but the last
  std::array<std::string_view, 3> overview_begin_pieces{};
  std::string_view overview_end_piece;
};

inline ImageTokens ImageTokensFor(ProjectorType t) {
  switch (t) {
    case ProjectorType::kGemma3: return {"<start_of_image>", "<start_of_image>", "<end_of_image>", "gemma3", true};
    case ProjectorType::kMlp: return {"<image>", "", "", "llama"};
    case ProjectorType::kIdefics3: {
      ImageTokens it{"<image>", "", "", "llama"};
      it.tiled = true;
      it.row_end_piece = "\n";
      it.overview_begin_pieces = {"\n\n", "<fake_token_around_image>", "<global-img>"};
      it.overview_end_piece = "<fake_token_around_image>";
      return it;
    }
    // the Qwen2-VL chat template's image, wrapped by libmtmd in vision_start/end
    case ProjectorType::kQwen25VL:
      return {"<|vision_start|><|image_pad|><|vision_end|>", "<|vision_start|>", "<|vision_end|>", "qwen2vl"};  // causal
  }
  return {};
}

// The text before tile (row, col) of a tiled picture (1-based, as the model writes it).
inline std::string TilePrefix(int32_t row, int32_t col) {
  return "<fake_token_around_image><row_" + std::to_string(row) + "_col_" + std::to_string(col) + ">";
}

// FNV-1a 64 over the preprocessed pixels' bytes: the picture's identity
// for the engine's cache of encoded pictures (ImageInput::hash).
inline uint64_t HashImagePixels(const std::vector<float>& pixels) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = reinterpret_cast<const unsigned char*>(pixels.data());
  for (size_t i = 0, n = pixels.size() * sizeof(float); i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// The hash of an own-size picture (Qwen2.5-VL): its pixels' hash with its
// W x H folded in, so two sizes of the same values differ.
inline uint64_t HashImageSize(uint64_t pixels_hash, int32_t width, int32_t height) {
  uint64_t h = pixels_hash;
  for (int32_t v : {width, height})
    for (int b = 0; b < 4; ++b) h = (h ^ ((static_cast<uint32_t>(v) >> (8 * b)) & 0xFFu)) * 0x100000001b3ull;
  return h;
}

}  // namespace llm
