#include "support/vision_reference.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "support/real_models.h"
#include "support/test_paths.h"
#include "synth_mmproj.h"
#include "synth_model.h"

namespace llm::test {
namespace {

std::string Fnv1a64Hex(const std::string& data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// llm-synth's arguments as the reference recorded them.
void ParseSynthArgs(const Json& ref, std::string* shape, synth::SynthOptions* o) {
  const std::vector<Json>& args = ref.Find("synth_args")->array();
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string key = args[i].as_string(), v = args[i + 1].as_string();
    if (key == "--shape") *shape = v;
    else if (key == "--type") o->type = v == "f32" ? TensorType::F32 : v == "f16" ? TensorType::F16 : TensorType::BF16;
    else if (key == "--seed") o->seed = std::stoull(v);
    else ADD_FAILURE() << "unknown llm-synth argument " << key;
  }
}

}  // namespace

void VisionReference::Take(int64_t offset, size_t n, void* dst) const {
  ASSERT_LE(static_cast<size_t>(offset) + n, bin.size());
  std::memcpy(dst, bin.data() + offset, n);
}

void VisionReference::TakeFloats(int64_t offset, size_t n, std::vector<float>* out) const {
  out->resize(n);
  Take(offset, n * sizeof(float), out->data());
}

void VisionReference::TakeRgb(int64_t offset, int32_t width, int32_t height, RgbImage* out) const {
  out->width = width;
  out->height = height;
  out->rgb.resize(static_cast<size_t>(width) * height * 3);
  Take(offset, out->rgb.size(), out->rgb.data());
}

void VisionReference::TakePicture(const Json& entry, RgbImage* out) const {
  TakeRgb(entry.Find("rgb_offset")->as_int(), static_cast<int32_t>(entry.Find("width")->as_int()),
          static_cast<int32_t>(entry.Find("height")->as_int()), out);
}

void LoadVisionReference(const std::string& name, VisionReference* out) {
  out->json = LoadReferenceJson("vision/" + name);
  out->bin = ReadFile(DataDir() + "/vision/" + name + ".bin");
  ASSERT_FALSE(out->bin.empty()) << "tests/data/vision/" << name << ".bin (unpacked from its .tar.xz at configure time)";
}

std::string TempModelPath(const std::string& stem, const std::string& suffix) {
  return ::testing::TempDir() + "/llmrt_" + stem + "_" + std::to_string(::getpid()) + suffix;
}

void SynthesizeReferenceProjector(const Json& ref, const std::string& proj_path, const char* generator) {
  synth::SynthOptions o;
  std::string shape;
  ParseSynthArgs(ref, &shape, &o);
  const synth::SynthVisionShape* vs = synth::FindSynthVisionShape(shape);
  ASSERT_NE(vs, nullptr) << shape;
  Status st = synth::WriteSynthMmproj(*vs, o, proj_path);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(Fnv1a64Hex(ReadFile(proj_path)), ref.Find("mmproj_fnv1a64")->as_string())
      << "llm-synth no longer writes the projector file llama.cpp ran (regenerate with " << generator << ")";
}

void SynthesizeReferencePair(const Json& ref, const std::string& text_path, const std::string& proj_path,
                             const char* generator) {
  synth::SynthOptions o;
  std::string shape;
  ParseSynthArgs(ref, &shape, &o);
  const synth::SynthShape* ts = synth::FindSynthShape(shape);
  const synth::SynthVisionShape* vs = synth::FindSynthVisionShape(shape);
  ASSERT_TRUE(ts != nullptr && vs != nullptr) << shape;
  ASSERT_TRUE(synth::WriteSynthModel(*ts, o, text_path).ok());
  ASSERT_TRUE(synth::WriteSynthMmproj(*vs, o, proj_path).ok());
  EXPECT_EQ(Fnv1a64Hex(ReadFile(text_path)), ref.Find("text_fnv1a64")->as_string())
      << "llm-synth no longer writes the text model llama.cpp ran (regenerate with " << generator << ")";
  EXPECT_EQ(Fnv1a64Hex(ReadFile(proj_path)), ref.Find("mmproj_fnv1a64")->as_string())
      << "llm-synth no longer writes the projector file llama.cpp ran (regenerate with " << generator << ")";
}

}  // namespace llm::test
