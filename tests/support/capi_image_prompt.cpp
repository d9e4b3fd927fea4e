#include "support/capi_image_prompt.h"

#include <gtest/gtest.h>

#include <cstring>

namespace llm::test {

llm_ctx_params ReferenceCtxParams(const char* model_path, const char* mmproj_path) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = model_path;
  p.mmproj_path = mmproj_path;
  p.backend = LLM_BACKEND_CPU;
  p.kv_type = LLM_KV_F32;
  p.n_threads = 2;
  return p;
}

void ImagePromptParts::Build(const std::string& text, const std::vector<const RgbImage*>& shown) {
  texts_.clear();
  parts_.clear();
  for (size_t at = 0;;) {  // the text around the markers
    const size_t m = text.find("<__media__>", at);
    texts_.push_back(text.substr(at, m == std::string::npos ? std::string::npos : m - at));
    if (m == std::string::npos) break;
    at = m + std::strlen("<__media__>");
  }
  ASSERT_EQ(texts_.size(), shown.size() + 1);
  for (size_t i = 0; i < texts_.size(); ++i) {
    llm_content_part t;
    llm_content_part_init(&t);
    t.kind = LLM_CONTENT_TEXT;
    t.text = texts_[i].c_str();
    if (!texts_[i].empty()) parts_.push_back(t);
    if (i == shown.size()) break;
    const RgbImage& img = *shown[i];
    llm_content_part im;
    llm_content_part_init(&im);
    im.kind = LLM_CONTENT_IMAGE_RGB;
    im.data = img.rgb.data();
    im.n_data = img.rgb.size();
    im.width = img.width;
    im.height = img.height;
    parts_.push_back(im);
  }
}

llm_request ImagePromptParts::Request() const {
  llm_request r;
  llm_request_init(&r);
  r.parts = parts_.data();
  r.n_parts = static_cast<int32_t>(parts_.size());
  r.tokenize_flags = LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL;
  return r;
}

}  // namespace llm::test
