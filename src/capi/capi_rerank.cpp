// llm_rerank_tokenize: a (query, document) pair as the model's reranker
// reads it. A file with a rerank template (GGUF
// tokenizer.chat_template.rerank, which llama.cpp's converter writes for
// Qwen3-Reranker) gets it with "{query}" and then "{document}" replaced and
// special tokens parsed, nothing added; any other (a cross-encoder) gets
// llama.cpp server's layout: [BOS] query [EOS] [SEP] document [EOS], each
// special only where the vocabulary adds it (add_bos / add_eos / add_sep
// token; EOS falling back to SEP when the file names none): BERT's [CLS] q
// [SEP] [SEP] d [SEP], XLM-RoBERTa's <s> q </s></s> d </s>.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "capi/capi_util.h"

using llm::capi::Fail;
using llm::capi::Guard;
using llm::capi::Ok;

namespace {

void ReplaceAll(std::string* s, const std::string& what, const std::string& with) {
  for (size_t at = s->find(what); at != std::string::npos; at = s->find(what, at + with.size()))
    s->replace(at, what.size(), with);
}

}  // namespace

LLM_API llm_status llm_rerank_tokenize(llm_ctx* ctx, const char* query, const char* document, llm_token* out,
                                       int32_t capacity, int32_t* n_out) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(query);
  LLM_CHECK_ARG(document);
  LLM_CHECK_ARG(n_out);
  *n_out = 0;
  if (capacity < 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "capacity must be >= 0");
  if (capacity > 0 && out == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "out is NULL but capacity > 0");
  return Guard([&]() -> llm_status {
    const llm::Model& model = ctx->engine->model();
    const llm::Tokenizer& tok = *model.tokenizer;
    std::vector<llm_token> ids;
    if (model.file != nullptr && model.file->Has("tokenizer.chat_template.rerank")) {
      auto tmpl = model.file->GetString("tokenizer.chat_template.rerank");
      if (!tmpl.ok()) return Fail(tmpl.status());
      std::string prompt(*tmpl);
      ReplaceAll(&prompt, "{query}", query);
      ReplaceAll(&prompt, "{document}", document);
      auto t = tok.Encode(prompt, /*add_special=*/false, /*parse_special=*/true);
      if (!t.ok()) return Fail(t.status());
      ids = std::move(*t);
    } else {
      auto q = tok.Encode(query, false, false);
      if (!q.ok()) return Fail(q.status().code(), "query: " + q.status().message());
      auto d = tok.Encode(document, false, false);
      if (!d.ok()) return Fail(d.status().code(), "document: " + d.status().message());
      const llm::TokenizerData& v = tok.data();
      const int32_t eos = v.eos >= 0 ? v.eos : v.sep;
      // WordPiece's add_eos is already its [SEP] (vocab_gguf.cpp).
      const bool add_eos = eos >= 0 && (v.add_eos || v.kind == llm::TokenizerData::Kind::kWordPiece);
      if (v.add_bos && v.bos >= 0) ids.push_back(v.bos);
      ids.insert(ids.end(), q->begin(), q->end());
      if (add_eos) ids.push_back(eos);
      if (v.add_sep && v.sep >= 0) ids.push_back(v.sep);
      ids.insert(ids.end(), d->begin(), d->end());
      if (add_eos) ids.push_back(eos);
    }
    if (ids.size() > static_cast<size_t>(INT32_MAX)) return Fail(LLM_ERR_INVALID_ARGUMENT, "the pair is too long");
    *n_out = static_cast<int32_t>(ids.size());
    if (ids.size() > static_cast<size_t>(capacity))
      return Fail(LLM_ERR_BUFFER_TOO_SMALL, "need room for " + std::to_string(ids.size()) + " tokens");
    std::copy(ids.begin(), ids.end(), out);
    return Ok();
  });
}
