// The llama.cpp references of the vision tests (tests/data/vision/<name>.json
// and .bin, written by tools/vision_reference.py,
// tools/vision_reference_qwen25vl.py and tools/vision_prompt_reference.py):
// the JSON, the binary blob its offsets point into, and the synthesized
// model files llama.cpp ran, rebuilt and checked byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/json.h"
#include "vision/image.h"

namespace llm::test {

struct VisionReference {
  Json json;
  std::string bin;

  // n bytes at `offset` of the blob into dst (a failed assertion, and dst
  // untouched, when they run past its end).
  void Take(int64_t offset, size_t n, void* dst) const;
  // n floats at `offset`, into *out resized to n.
  void TakeFloats(int64_t offset, size_t n, std::vector<float>* out) const;
  // A width x height picture at `offset`.
  void TakeRgb(int64_t offset, int32_t width, int32_t height, RgbImage* out) const;
  // The picture an entry of the JSON describes: its "width", "height" and
  // "rgb_offset".
  void TakePicture(const Json& entry, RgbImage* out) const;
};

// tests/data/vision/<name>.json and .bin (unpacked from their .tar.xz at
// configure time); a failed assertion when the blob is missing.
void LoadVisionReference(const std::string& name, VisionReference* out);

// A file name in the test's temporary folder, this process's own:
// <TempDir>/llmrt_<stem>_<pid><suffix>.
std::string TempModelPath(const std::string& stem, const std::string& suffix);

// The projector file llama.cpp ran, rebuilt from the reference's
// "synth_args" (llm-synth's --shape, --type, --seed) at `proj_path`; its
// bytes must hash to the reference's "mmproj_fnv1a64" (`generator`, the
// script that wrote the reference, is named when they do not).
void SynthesizeReferenceProjector(const Json& ref, const std::string& proj_path, const char* generator);
// The same for a text model and its projector ("text_fnv1a64" and
// "mmproj_fnv1a64").
void SynthesizeReferencePair(const Json& ref, const std::string& text_path, const std::string& proj_path,
                             const char* generator);

}  // namespace llm::test
