// Embeddings and reranking over HTTP (issue 31):
//   POST /v1/embeddings (also /embeddings)  OpenAI's shape:
//     {"input": string | [string] | [id] | [[id]], "model"?, "encoding_format"?:
//      "float" | "base64", "dimensions"?: int, "user"?}
//     -> {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
//         "model", "usage": {"prompt_tokens", "total_tokens"}}
//   POST /v1/rerank (also /rerank, /v1/reranking)  the Jina / Cohere shape
//     llama.cpp's server accepts:
//     {"query": string | [id], "documents": [string | [id]], "top_n"?, "return_documents"?, "model"?}
//     -> {"object": "list", "model", "results": [{"index", "relevance_score", "document"?}]
//         sorted by relevance_score, highest first, at most top_n, "usage"}
// Vectors come from llm_embed (L2-normalised, as OpenAI's are); rerank
// scores are the model's classifier output (LLM_POOLING_RANK) for
// [BOS] query [EOS] [EOS] document [EOS], llama.cpp's layout (its SEP is the
// EOS of the XLM-R rerankers). Bad input is a 400 naming the parameter; a
// model that cannot embed (or rerank) is a 501.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "openai_request.h"

namespace server {

inline constexpr size_t kMaxEmbedInputs = 2048;  // OpenAI's limit on `input` entries

// One input: a text to tokenize or token ids as given.
struct EmbedInput {
  bool is_tokens = false;
  std::string text;
  std::vector<llm_token> tokens;
};

struct EmbeddingsRequest {
  std::vector<EmbedInput> inputs;
  bool base64 = false;
  int32_t dimensions = 0;  // 0: the model's
};

struct RerankRequest {
  EmbedInput query;
  std::vector<EmbedInput> documents;
  int64_t top_n = -1;  // -1: all
  bool return_documents = false;
};

// Parsers (pure: the fuzzer reaches them through the routes). false with
// *err set on a bad request.
bool ParseEmbeddingsRequest(const json& body, EmbeddingsRequest* out, ApiError* err);
bool ParseRerankRequest(const json& body, RerankRequest* out, ApiError* err);

// Little-endian float32 bytes as base64 (OpenAI's encoding_format "base64").
std::string Base64Floats(const float* v, size_t n);

struct EmbedInfo {
  llm_ctx* ctx = nullptr;
  std::string model_name;
};

void RegisterEmbeddingRoutes(httplib::Server* svr, EmbedInfo info);

}  // namespace server
