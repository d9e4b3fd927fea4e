#include "native_completion.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "openai_response.h"

namespace server {
namespace {

// Sampler settings of llama.cpp that would change the output and that this
// server does not have: a request that turns one on is refused, naming it.
struct Off {
  const char* name;
  double off;
};
constexpr Off kUnsupported[] = {{"typical_p", 1.0},        {"mirostat", 0.0},       {"dry_multiplier", 0.0},
                                {"xtc_probability", 0.0},  {"dynatemp_range", 0.0}, {"top_n_sigma", -1.0}};

// llama.cpp's logit_bias: [[id or text, bias], ...] (bias false: never) or
// {"id or text": bias}; text stands for every token it tokenizes into.
// OpenAI's shape ({"id": bias}) out.
bool LogitBias(const json& in, const Tokenize& tokenize, json* out, ApiError* err) {
  *out = json::object();
  auto add = [&](const json& key, const json& bias) {
    const double b = bias.is_boolean() ? (bias.get<bool>() ? 0.0 : -100.0) : (bias.is_number() ? bias.get<double>() : 1e9);
    if (b < -100.0 || b > 100.0) return Bad(err, "logit_bias", "each logit_bias must be false or a number in [-100, 100]");
    std::vector<llm_token> ids;
    if (key.is_number_integer()) {
      ids.push_back(static_cast<llm_token>(key.get<int64_t>()));
    } else if (key.is_string()) {
      const std::string& k = key.get_ref<const std::string&>();
      char* end = nullptr;
      const long long id = std::strtoll(k.c_str(), &end, 10);
      if (!k.empty() && *end == '\0')
        ids.push_back(static_cast<llm_token>(id));
      else if (!tokenize(k, false, &ids))
        return Bad(err, "logit_bias", "a logit_bias text is not valid UTF-8");
    } else {
      return Bad(err, "logit_bias", "logit_bias keys must be token ids or text");
    }
    for (llm_token id : ids) (*out)[std::to_string(id)] = b;
    return true;
  };
  if (in.is_array()) {
    for (const json& pair : in) {
      if (!pair.is_array() || pair.size() != 2) return Bad(err, "logit_bias", "logit_bias must be a list of [token, bias] pairs");
      if (!add(pair[0], pair[1])) return false;
    }
    return true;
  }
  if (in.is_object()) {
    for (auto it = in.begin(); it != in.end(); ++it)
      if (!add(json(it.key()), it.value())) return false;
    return true;
  }
  return Bad(err, "logit_bias", "logit_bias must be a list of [token, bias] pairs or an object");
}

// One prompt of llama.cpp's forms: text, token ids, text and ids mixed
// (["text", 12, 34]: concatenated, BOS only before a leading text), or
// {"prompt_string": text} (its multimodal form, without the media).
bool Prompt(const json& p, const Tokenize& tokenize, json* out, ApiError* err) {
  if (p.is_object()) {
    if (p.contains("multimodal_data"))
      return Bad(err, "prompt", "multimodal prompts are not supported: this model has no vision or audio input");
    auto it = p.find("prompt_string");
    if (it == p.end() || !it->is_string()) return Bad(err, "prompt", "a prompt object needs a \"prompt_string\"");
    *out = *it;
    return true;
  }
  if (!p.is_array()) {
    *out = p;
    return true;
  }
  bool text = false, ids = false;
  for (const json& e : p) {
    if (e.is_number_integer()) ids = true;
    else if (e.is_string()) text = true;
  }
  if (!(text && ids)) {
    *out = p;
    return true;
  }
  std::vector<llm_token> all;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].is_number_integer()) {
      all.push_back(static_cast<llm_token>(p[i].get<int64_t>()));
    } else if (p[i].is_string()) {
      if (!tokenize(p[i].get<std::string>(), i == 0, &all)) return Bad(err, "prompt", "the prompt is not valid UTF-8");
    } else {
      return Bad(err, "prompt", "a mixed prompt holds text and token ids only");
    }
  }
  *out = all;
  return true;
}

json Bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

std::string Sse(const json& j) { return "data: " + Dump(j) + "\n\n"; }

}  // namespace

bool ParseNativeCompletion(const json& body, const RequestDefaults& d, const Tokenize& tokenize, Generation* g,
                           NativeOptions* opt, ApiError* err) {
  if (!body.is_object()) return Bad(err, "", "the request body must be a JSON object");
  for (const Off& o : kUnsupported) {
    const json* f = Field(body, o.name);
    if (f != nullptr && !(f->is_number() && f->get<double>() == o.off))
      return Bad(err, o.name, std::string(o.name) + " is not supported by this server (leave it at its default)");
  }
  json t = json::object();
  if (const json* p = Field(body, "prompt")) {
    // A list of prompts (each in any of the forms) or one prompt.
    const bool several = p->is_array() && !p->empty() && ((*p)[0].is_array() || (*p)[0].is_object() ||
                                                          ((*p)[0].is_string() && std::all_of(p->begin(), p->end(), [](const json& e) { return !e.is_number_integer(); })));
    if (several) {
      json list = json::array();
      for (const json& e : *p) {
        json one;
        if (!Prompt(e, tokenize, &one, err)) return false;
        list.push_back(std::move(one));
      }
      t["prompt"] = std::move(list);
      opt->multi = true;
    } else {
      json one;
      if (!Prompt(*p, tokenize, &one, err)) return false;
      t["prompt"] = std::move(one);
    }
  }
  if (const json* f = Field(body, "response_fields")) {
    if (!f->is_array()) return Bad(err, "response_fields", "response_fields must be a list of field names");
    for (const json& e : *f) {
      if (!e.is_string()) return Bad(err, "response_fields", "response_fields must be a list of field names");
      opt->response_fields.push_back(e.get<std::string>());
    }
  }
  for (const char* name : {"model", "top_p", "min_p", "stop", "ignore_eos", "presence_penalty",
                           "frequency_penalty", "stream", "grammar", "min_tokens"}) {
    if (const json* f = Field(body, name)) t[name] = *f;
  }
  if (const json* f = Field(body, "temperature")) t["temperature"] = f->is_number() && f->get<double>() < 0 ? json(0.0) : *f;
  if (const json* f = Field(body, "top_k")) t["top_k"] = f->is_number_integer() && f->get<int64_t>() < 0 ? json(0) : *f;
  if (const json* f = Field(body, "repeat_penalty"))
    t["repetition_penalty"] = f->is_number() && f->get<double>() <= 0 ? json(1.0) : *f;
  if (const json* f = Field(body, "seed")) {
    // -1 (and its unsigned 32-bit form): a random seed, as in llama.cpp.
    const bool random = f->is_number_integer() && (f->get<int64_t>() == -1 || f->get<int64_t>() == 0xFFFFFFFFll);
    if (!random) t["seed"] = *f;
  }
  if (const json* f = Field(body, "json_schema")) {
    if (Field(body, "grammar") != nullptr) return Bad(err, "json_schema", "send json_schema or grammar, not both");
    t["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "schema"}, {"schema", *f}}}};
  }
  if (const json* f = Field(body, "logit_bias")) {
    json lb;
    if (!LogitBias(*f, tokenize, &lb, err)) return false;
    t["logit_bias"] = std::move(lb);
  }
  int64_t n_predict = -1;
  if (const json* f = Field(body, "n_predict")) {
    if (!f->is_number_integer() || f->get<int64_t>() < -1 || f->get<int64_t>() == 0 ||
        f->get<int64_t>() > std::numeric_limits<int32_t>::max())
      return Bad(err, "n_predict", "n_predict must be -1 (until the context ends) or a positive integer");
    n_predict = f->get<int64_t>();
    if (n_predict > 0) t["max_tokens"] = n_predict;
  }
  if (const json* f = Field(body, "id_slot")) {
    if (!f->is_number_integer() || f->get<int64_t>() < -1 || f->get<int64_t>() > (1 << 20))
      return Bad(err, "id_slot", "id_slot must be -1 (any) or a slot number");
    opt->id_slot = static_cast<int32_t>(f->get<int64_t>());
  }
  if (const json* f = Field(body, "n_probs")) {
    if (!f->is_number_integer() || f->get<int64_t>() < 0 || f->get<int64_t>() > 20)
      return Bad(err, "n_probs", "n_probs must be an integer in [0, 20]");
    opt->n_probs = static_cast<int32_t>(f->get<int64_t>());
  }
  if (const json* f = Field(body, "return_tokens")) {
    if (!f->is_boolean()) return Bad(err, "return_tokens", "return_tokens must be a boolean");
    opt->return_tokens = f->get<bool>();
  }
  // llama.cpp's sampling defaults where neither the request nor the
  // server's command line sets one.
  if (!t.contains("temperature") && !d.temperature) t["temperature"] = 0.8;
  if (!t.contains("top_k") && !d.top_k) t["top_k"] = 40;
  if (!t.contains("top_p") && !d.top_p) t["top_p"] = 0.95;
  if (!t.contains("min_p") && !d.min_p) t["min_p"] = 0.05;

  if (!ParseCompletionRequest(t, g, err)) return false;
  if (n_predict < 0) g->max_tokens = 0;  // until EOS or the context's end
  if (Field(body, "n_predict") == nullptr) t.erase("max_tokens");
  else t["n_predict"] = n_predict;  // the server's -n does not replace it
  ApplyRequestDefaults(t, d, g);
  opt->n_predict = g->max_tokens > 0 ? g->max_tokens : -1;
  if (opt->n_probs > 0) {
    g->logprobs = true;
    g->top_logprobs = opt->n_probs;
  }
  const llm_sampling_params& s = g->sampling;
  opt->settings = {{"n_predict", opt->n_predict},
                   {"seed", s.seed == LLM_SEED_RANDOM ? json(0xFFFFFFFFu) : json(s.seed)},
                   {"temperature", s.temperature},
                   {"top_k", s.top_k},
                   {"top_p", s.top_p},
                   {"min_p", s.min_p},
                   {"repeat_penalty", s.repetition_penalty},
                   {"repeat_last_n", s.penalty_last_n},
                   {"presence_penalty", s.presence_penalty},
                   {"frequency_penalty", s.frequency_penalty},
                   {"stop", g->stop},
                   {"ignore_eos", g->ignore_eos},
                   {"n_probs", opt->n_probs},
                   {"stream", g->stream},
                   {"grammar", g->constraint_kind == LLM_CONSTRAINT_GRAMMAR ? g->constraint : std::string()}};
  return true;
}

NativeCompletionWriter::NativeCompletionWriter(const Generation& g, NativeOptions opt, std::string model,
                                               TokenText token_text)
    : opt_(std::move(opt)), stops_(g.stop), model_(std::move(model)), token_text_(std::move(token_text)),
      results_(g.prompts.size()) {
  if (opt_.prompt_texts.size() == g.prompts.size()) {
    prompts_ = opt_.prompt_texts;
    return;
  }
  for (const PromptInput& in : g.prompts) {
    if (!in.is_tokens) {
      prompts_.push_back(in.text);
      continue;
    }
    std::string text;
    for (llm_token t : in.tokens) text += token_text_(t);
    prompts_.push_back(std::move(text));
  }
}

json NativeCompletionWriter::Probability(llm_token token, float logprob,
                                         const std::vector<llm_top_logprob>& top) const {
  const std::string piece = token_text_(token);
  json alts = json::array();
  for (const llm_top_logprob& t : top) {
    const std::string p = token_text_(t.token);
    alts.push_back({{"id", t.token}, {"token", p}, {"logprob", t.logprob}, {"bytes", Bytes(p)}});
  }
  return {{"id", token}, {"token", piece}, {"logprob", logprob}, {"bytes", Bytes(piece)}, {"top_logprobs", alts}};
}

void NativeCompletionWriter::Record(const SeqEvent& e, Result* r) {
  r->content += e.text;
  if (!e.final) {
    r->tokens.push_back(e.token);
    if (opt_.n_probs > 0) r->probs.push_back(Probability(e.token, e.logprob, e.top));
    return;
  }
  if (!r->finished) ++finished_;
  r->finished = true;
  r->finish_reason = e.finish_reason;
  r->status = e.status;
  r->message = e.message;
  r->metrics = e.metrics;
}

void NativeCompletionWriter::Apply(const std::vector<SeqEvent>& events) {
  for (const SeqEvent& e : events)
    if (e.choice >= 0 && static_cast<size_t>(e.choice) < results_.size()) Record(e, &results_[e.choice]);
}

json NativeCompletionWriter::Final(size_t index, const Result& r) const {
  const llm_metrics& m = r.metrics;
  std::string stop_type = "none", stopping_word;
  if (r.finish_reason == LLM_FINISH_LENGTH) {
    stop_type = "limit";
  } else if (r.finish_reason == LLM_FINISH_STOP) {
    // A stop string ends the text the tokens spell out; EOS spells nothing.
    stop_type = "eos";
    std::string raw;
    for (llm_token t : r.tokens) raw += token_text_(t);
    const size_t from = r.content.size() > 16 ? r.content.size() - 16 : 0;
    for (const std::string& s : stops_) {
      if (raw.find(s, from) != std::string::npos) {
        stop_type = "word";
        stopping_word = s;
        break;
      }
    }
  }
  const int32_t prompt_n = m.prompt_tokens - m.cached_prompt_tokens;
  const double prompt_ms = std::max(0.0, m.ttft_ms - m.queue_ms);
  const double predicted_ms = std::max(0.0, m.total_ms - m.ttft_ms);
  auto per_token = [](double ms, int32_t n) { return n > 0 ? ms / n : 0.0; };
  auto per_second = [](double ms, int32_t n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
  json j = {{"index", index},
            {"content", r.content},
            {"tokens", opt_.return_tokens ? json(r.tokens) : json::array()},
            {"id_slot", opt_.id_slot},
            {"stop", true},
            {"model", model_},
            {"tokens_predicted", m.generated_tokens},
            {"tokens_evaluated", m.prompt_tokens},
            {"generation_settings", opt_.settings},
            {"prompt", index < prompts_.size() ? prompts_[index] : std::string()},
            {"has_new_line", r.content.find('\n') != std::string::npos},
            {"truncated", false},
            {"stop_type", stop_type},
            {"stopping_word", stopping_word},
            {"tokens_cached", m.prompt_tokens + m.generated_tokens},
            {"timings",
             {{"cache_n", m.cached_prompt_tokens},
              {"prompt_n", prompt_n},
              {"prompt_ms", prompt_ms},
              {"prompt_per_token_ms", per_token(prompt_ms, prompt_n)},
              {"prompt_per_second", per_second(prompt_ms, prompt_n)},
              {"predicted_n", m.generated_tokens},
              {"predicted_ms", predicted_ms},
              {"predicted_per_token_ms", per_token(predicted_ms, m.generated_tokens)},
              {"predicted_per_second", per_second(predicted_ms, m.generated_tokens)}}}};
  if (opt_.n_probs > 0) j["completion_probabilities"] = r.probs;
  return j;
}

json NativeCompletionWriter::Select(json result) const {
  if (opt_.response_fields.empty()) return result;
  json out = json::object();
  for (const std::string& f : opt_.response_fields) {
    const json* at = &result;
    size_t from = 0;
    while (at != nullptr) {
      const size_t slash = f.find('/', from);
      const std::string key = f.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
      auto it = at->is_object() ? at->find(key) : at->end();
      at = it == at->end() ? nullptr : &*it;
      if (slash == std::string::npos) break;
      from = slash + 1;
    }
    if (at != nullptr) out[f] = *at;  // flattened under the path, as llama.cpp does
  }
  return out;
}

json NativeCompletionWriter::Body() const {
  if (!opt_.multi) return Select(Final(0, results_[0]));
  json all = json::array();
  for (size_t i = 0; i < results_.size(); ++i) all.push_back(Select(Final(i, results_[i])));
  return all;
}

std::string NativeCompletionWriter::StreamEvents(const std::vector<SeqEvent>& events) {
  std::string out;
  for (const SeqEvent& e : events) {
    if (e.choice < 0 || static_cast<size_t>(e.choice) >= results_.size()) continue;
    const size_t i = static_cast<size_t>(e.choice);
    Result& r = results_[i];
    r.probs = json::array();  // only this event's
    Record(e, &r);
    if (!e.final) {
      json chunk = {{"index", i},        {"content", e.text}, {"tokens", json::array({e.token})},
                    {"stop", false},     {"id_slot", opt_.id_slot},     {"tokens_predicted", r.tokens.size()},
                    {"tokens_evaluated", 0}};
      if (opt_.n_probs > 0) chunk["completion_probabilities"] = r.probs;
      out += Sse(chunk);
      continue;
    }
    if (r.finish_reason == LLM_FINISH_ERROR || r.finish_reason == LLM_FINISH_CANCELLED) continue;  // StreamEnd says
    if (!e.text.empty())
      out += Sse({{"index", i}, {"content", e.text}, {"tokens", json::array()}, {"stop", false}, {"id_slot", opt_.id_slot}});
    json last = Final(i, r);
    last["content"] = "";
    last["tokens"] = json::array();
    last.erase("completion_probabilities");
    out += Sse(last);
  }
  return out;
}

std::string NativeCompletionWriter::StreamEnd() {
  ApiError err;
  if (Failed(&err)) return Sse(ErrorBody(err));
  return "";
}

bool NativeCompletionWriter::Failed(ApiError* err) const {
  for (const Result& r : results_) {
    if (!r.finished) continue;
    if (r.finish_reason == LLM_FINISH_ERROR) {
      *err = StatusError(r.status, r.message);
      return true;
    }
    if (r.finish_reason == LLM_FINISH_CANCELLED) {
      *err = StatusError(LLM_ERR_SHUTDOWN, "the request was cancelled: the server is shutting down");
      return true;
    }
  }
  return false;
}

}  // namespace server
