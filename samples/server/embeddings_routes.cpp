#include "embeddings_routes.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "http_body.h"

namespace server {
namespace {

bool Fail(ApiError* err, const std::string& param, const std::string& message) {
  err->http_status = 400;
  err->param = param;
  err->message = message;
  return false;
}

// A token-id array: every element an integer that fits llm_token.
bool TokenArray(const json& a, const std::string& param, std::vector<llm_token>* out, ApiError* err) {
  out->clear();
  for (const json& t : a) {
    if (!t.is_number_integer()) return Fail(err, param, param + " must hold integers (token ids)");
    const int64_t v = t.get<int64_t>();
    if (v < 0 || v > INT32_MAX) return Fail(err, param, param + " holds a token id out of range");
    out->push_back(static_cast<llm_token>(v));
  }
  return true;
}

// A string or a token array.
bool OneInput(const json& v, const std::string& param, EmbedInput* in, ApiError* err) {
  if (v.is_string()) {
    in->text = v.get<std::string>();
    if (in->text.empty()) return Fail(err, param, param + " is an empty string");
    return true;
  }
  if (v.is_array()) {
    in->is_tokens = true;
    if (!TokenArray(v, param, &in->tokens, err)) return false;
    if (in->tokens.empty()) return Fail(err, param, param + " is an empty token array");
    return true;
  }
  return Fail(err, param, param + " must be a string or an array of token ids");
}

// What llm_tokenize gives for a text (no special tokens added: the caller
// decides), or the ids as given.
llm_status ToTokens(llm_ctx* ctx, const EmbedInput& in, uint32_t flags, std::vector<llm_token>* out) {
  if (in.is_tokens) {
    *out = in.tokens;
    return LLM_OK;
  }
  out->assign(in.text.size() + 8, 0);
  int32_t n = 0;
  llm_status s = llm_tokenize(ctx, in.text.data(), in.text.size(), flags, out->data(),
                              static_cast<int32_t>(out->size()), &n);
  if (s == LLM_ERR_BUFFER_TOO_SMALL) {
    out->resize(static_cast<size_t>(n));
    s = llm_tokenize(ctx, in.text.data(), in.text.size(), flags, out->data(), n, &n);
  }
  if (s == LLM_OK) out->resize(static_cast<size_t>(n));
  return s;
}

ApiError FromStatus(llm_status s, const std::string& param) {
  ApiError e = StatusError(s, llm_last_error());
  if (s == LLM_ERR_UNSUPPORTED) {  // the model (or this build) cannot do it: not the caller's bytes
    e.http_status = 501;
    e.type = "not_supported_error";
    e.code = "";
  }
  e.param = param;
  return e;
}

// llm_embed over token arrays: rows (n, *dim), or an error sent.
bool EmbedAll(llm_ctx* ctx, const std::vector<std::vector<llm_token>>& ids, int32_t pooling, int32_t normalize,
              int32_t dimensions, std::vector<float>* out, int32_t* dim, httplib::Response& res,
              const std::string& param) {
  std::vector<const llm_token*> ptrs;
  std::vector<int32_t> lens;
  for (const auto& v : ids) ptrs.push_back(v.data()), lens.push_back(static_cast<int32_t>(v.size()));
  llm_embed_params p;
  llm_embed_params_init(&p);
  p.pooling = pooling;
  p.normalize = normalize;
  p.dimensions = dimensions;
  const int32_t n = static_cast<int32_t>(ids.size());
  llm_status s = llm_embed(ctx, nullptr, ptrs.data(), lens.data(), n, &p, nullptr, 0, dim);
  if (s == LLM_ERR_BUFFER_TOO_SMALL) {
    out->assign(static_cast<size_t>(n) * static_cast<size_t>(*dim), 0.0f);
    s = llm_embed(ctx, nullptr, ptrs.data(), lens.data(), n, &p, out->data(), out->size(), dim);
  }
  if (s != LLM_OK) {
    SendError(res, FromStatus(s, param));
    return false;
  }
  return true;
}

void Embeddings(const EmbedInfo& info, const json& body, httplib::Response& res) {
  EmbeddingsRequest r;
  ApiError err;
  if (!ParseEmbeddingsRequest(body, &r, &err)) return SendError(res, err);
  std::vector<std::vector<llm_token>> ids(r.inputs.size());
  int64_t n_tokens = 0;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    if (llm_status s = ToTokens(info.ctx, r.inputs[i], LLM_TOKENIZE_ADD_SPECIAL, &ids[i]); s != LLM_OK)
      return SendError(res, FromStatus(s, "input"));
    if (ids[i].empty()) return SendError(res, FromStatus(LLM_ERR_INVALID_ARGUMENT, "input"));
    n_tokens += static_cast<int64_t>(ids[i].size());
  }
  std::vector<float> vecs;
  int32_t dim = 0;
  if (!EmbedAll(info.ctx, ids, LLM_POOLING_MODEL, 1, r.dimensions, &vecs, &dim, res,
                r.dimensions > 0 ? "dimensions" : "input"))
    return;
  json data = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* v = vecs.data() + i * static_cast<size_t>(dim);
    json e = {{"object", "embedding"}, {"index", i}};
    if (r.base64) {
      e["embedding"] = Base64Floats(v, static_cast<size_t>(dim));
    } else {
      e["embedding"] = std::vector<float>(v, v + dim);
    }
    data.push_back(std::move(e));
  }
  SendJson(res, 200,
           {{"object", "list"},
            {"data", std::move(data)},
            {"model", info.model_name},
            {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}});
}

void Rerank(const EmbedInfo& info, const json& body, httplib::Response& res) {
  RerankRequest r;
  ApiError err;
  if (!ParseRerankRequest(body, &r, &err)) return SendError(res, err);
  llm_model_info mi{};
  mi.struct_size = sizeof mi;
  if (llm_model_get_info(info.ctx, &mi) != LLM_OK) return SendError(res, FromStatus(LLM_ERR_INTERNAL, ""));
  std::vector<llm_token> q;
  if (llm_status s = ToTokens(info.ctx, r.query, 0, &q); s != LLM_OK) return SendError(res, FromStatus(s, "query"));
  // Texts: the pair as the model's reranker reads it (its rerank template,
  // or [BOS] query [EOS] [SEP] document [EOS] as the vocabulary adds them:
  // llm_rerank_tokenize); token arrays: [BOS] q [EOS] [EOS] d [EOS] around
  // the ids given (the same for BERT and XLM-R, whose separator is EOS).
  std::vector<std::vector<llm_token>> ids(r.documents.size());
  int64_t n_tokens = 0;
  for (size_t i = 0; i < r.documents.size(); ++i) {
    if (!r.query.is_tokens && !r.documents[i].is_tokens) {
      int32_t n = 0;
      llm_status s = llm_rerank_tokenize(info.ctx, r.query.text.c_str(), r.documents[i].text.c_str(), nullptr, 0, &n);
      if (s == LLM_ERR_BUFFER_TOO_SMALL) {
        ids[i].resize(static_cast<size_t>(n));
        s = llm_rerank_tokenize(info.ctx, r.query.text.c_str(), r.documents[i].text.c_str(), ids[i].data(), n, &n);
      }
      if (s != LLM_OK) return SendError(res, FromStatus(s, "documents"));
      n_tokens += static_cast<int64_t>(ids[i].size());
      continue;
    }
    std::vector<llm_token> d;
    if (llm_status s = ToTokens(info.ctx, r.documents[i], 0, &d); s != LLM_OK)
      return SendError(res, FromStatus(s, "documents"));
    std::vector<llm_token>& t = ids[i];
    if (mi.bos >= 0) t.push_back(mi.bos);
    t.insert(t.end(), q.begin(), q.end());
    if (mi.eos >= 0) t.push_back(mi.eos), t.push_back(mi.eos);
    t.insert(t.end(), d.begin(), d.end());
    if (mi.eos >= 0) t.push_back(mi.eos);
    n_tokens += static_cast<int64_t>(t.size());
  }
  std::vector<float> scores;
  int32_t dim = 0;
  if (!EmbedAll(info.ctx, ids, LLM_POOLING_RANK, 0, 0, &scores, &dim, res, "documents")) return;
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a * dim] > scores[b * dim]; });
  const size_t keep = r.top_n < 0 ? order.size() : std::min(order.size(), static_cast<size_t>(r.top_n));
  json results = json::array();
  for (size_t k = 0; k < keep; ++k) {
    const size_t i = order[k];
    json e = {{"index", i}, {"relevance_score", scores[i * dim]}};
    if (r.return_documents) {
      e["document"] = r.documents[i].is_tokens ? json(r.documents[i].tokens) : json{{"text", r.documents[i].text}};
    }
    results.push_back(std::move(e));
  }
  SendJson(res, 200,
           {{"object", "list"},
            {"model", info.model_name},
            {"results", std::move(results)},
            {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}});
}

}  // namespace

bool ParseEmbeddingsRequest(const json& body, EmbeddingsRequest* out, ApiError* err) {
  if (!body.is_object()) return Fail(err, "", "the request body must be a JSON object");
  auto in = body.find("input");
  if (in == body.end()) return Fail(err, "input", "input is required");
  out->inputs.clear();
  if (in->is_string()) {
    out->inputs.emplace_back();
    if (!OneInput(*in, "input", &out->inputs.back(), err)) return false;
  } else if (in->is_array()) {
    if (in->empty()) return Fail(err, "input", "input is an empty array");
    if (in->size() > kMaxEmbedInputs)
      return Fail(err, "input", "input has more than " + std::to_string(kMaxEmbedInputs) + " entries");
    if ((*in)[0].is_number()) {  // one token array
      out->inputs.emplace_back();
      if (!OneInput(*in, "input", &out->inputs.back(), err)) return false;
    } else {
      for (const json& v : *in) {
        out->inputs.emplace_back();
        if (!OneInput(v, "input", &out->inputs.back(), err)) return false;
      }
    }
  } else {
    return Fail(err, "input", "input must be a string, an array of strings or token arrays");
  }
  out->base64 = false;
  if (auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64"))
      return Fail(err, "encoding_format", "encoding_format must be \"float\" or \"base64\"");
    out->base64 = *f == "base64";
  }
  out->dimensions = 0;
  if (auto d = body.find("dimensions"); d != body.end() && !d->is_null()) {
    if (!d->is_number_integer() || d->get<int64_t>() < 1 || d->get<int64_t>() > 1 << 20)
      return Fail(err, "dimensions", "dimensions must be a positive integer");
    out->dimensions = static_cast<int32_t>(d->get<int64_t>());
  }
  return true;
}

bool ParseRerankRequest(const json& body, RerankRequest* out, ApiError* err) {
  if (!body.is_object()) return Fail(err, "", "the request body must be a JSON object");
  auto q = body.find("query");
  if (q == body.end()) return Fail(err, "query", "query is required");
  if (!OneInput(*q, "query", &out->query, err)) return false;
  auto docs = body.find("documents");
  if (docs == body.end()) docs = body.find("texts");  // TEI's name
  if (docs == body.end() || !docs->is_array()) return Fail(err, "documents", "documents must be an array");
  if (docs->empty()) return Fail(err, "documents", "documents is empty: nothing to rank");
  if (docs->size() > kMaxEmbedInputs)
    return Fail(err, "documents", "documents has more than " + std::to_string(kMaxEmbedInputs) + " entries");
  out->documents.clear();
  for (const json& d : *docs) {
    out->documents.emplace_back();
    // Cohere's {"text": ...} objects too
    const json& v = d.is_object() && d.contains("text") ? d["text"] : d;
    if (!OneInput(v, "documents", &out->documents.back(), err)) return false;
  }
  out->top_n = -1;
  if (auto t = body.find("top_n"); t != body.end() && !t->is_null()) {
    if (!t->is_number_integer() || t->get<int64_t>() < 0) return Fail(err, "top_n", "top_n must be an integer >= 0");
    out->top_n = t->get<int64_t>();
  }
  out->return_documents = false;
  if (auto r = body.find("return_documents"); r != body.end() && !r->is_null()) {
    if (!r->is_boolean()) return Fail(err, "return_documents", "return_documents must be a boolean");
    out->return_documents = r->get<bool>();
  }
  return true;
}

std::string Base64Floats(const float* v, size_t n) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(n * 4, '\0');
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((u >> (8 * b)) & 0xFF);  // little-endian
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t a = static_cast<unsigned char>(bytes[i]);
    const uint32_t b = i + 1 < bytes.size() ? static_cast<unsigned char>(bytes[i + 1]) : 0;
    const uint32_t c = i + 2 < bytes.size() ? static_cast<unsigned char>(bytes[i + 2]) : 0;
    const uint32_t w = (a << 16) | (b << 8) | c;
    out += kAlphabet[(w >> 18) & 63];
    out += kAlphabet[(w >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(w >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[w & 63] : '=';
  }
  return out;
}

void RegisterEmbeddingRoutes(httplib::Server* svr, EmbedInfo info) {
  auto post = [svr, info](const char* path, void (*handler)(const EmbedInfo&, const json&, httplib::Response&)) {
    svr->Post(path, [info, handler](const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& reader) {
      json body;
      size_t bytes = 0;
      if (!ReadJsonBody(req, reader, res, &body, &bytes)) return;
      handler(info, body, res);
    });
  };
  for (const char* p : {"/v1/embeddings", "/embeddings"}) post(p, Embeddings);
  for (const char* p : {"/v1/rerank", "/rerank", "/v1/reranking", "/reranking"}) post(p, Rerank);
}

}  // namespace server
