// Real-world JSON Schemas (issue 29): coverage, compile time and the
// per-token mask cost over tests/data/json_schema_realworld (made by
// tools/gen_schema_realworld.py: SchemaStore, metaschemas, OpenAPI,
// nbformat, CloudFormation resource schemas).
//
//   schema-realworld [model.gguf] [schemas.jsonl.gz] [walks=4] [tokens=48] [walks.jsonl]
//
// 1. Every schema compiled (schema -> grammar -> byte program, best of 3):
//    share compiled, refusals grouped by the keyword their message names,
//    compile time p50 / p99 / max.
// 2. Per compiled schema, `walks` random token walks of up to `tokens`
//    tokens on the model's vocabulary, each token picked uniformly among the
//    ones the constraint allows (EOS taken when allowed, half the time),
//    through the engine's constraint path (ConstraintState::Apply: sync,
//    mask, the -inf pass) with a fresh SharedMatcher per schema (a schema's
//    first request: no mask cached). The time of each Apply is one token's
//    masking; p50 / p99 / mean against the model's plain decode time per
//    token at batch 1 (measured before and after, median of 3 runs each).
// 3. Walks that ended with EOS are complete values: written to walks.jsonl
//    ({"name", "text"}) for tools/validate_realworld_walks.py, which checks
//    them with jsonschema.
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "constrain/constraint.h"
#include "constrain/token_trie.h"
#include "llm.h"
#include "model/model.h"
#include "util/json.h"

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// The keyword a refusal's message names first ("JSON Schema: uniqueItems at
// /a ...", "keyword \"$recursiveRef\" at ...", "\"prefixItems\" at ...").
std::string KeywordOf(std::string m) {
  const std::string prefix = "JSON Schema: ";
  if (m.rfind(prefix, 0) == 0) m = m.substr(prefix.size());
  if (m.rfind("no value satisfies", 0) == 0) return "(no value satisfies the schema)";
  if (m.rfind("keyword \"", 0) == 0) m = m.substr(8);
  if (!m.empty() && m[0] == '"') return m.substr(1, m.find('"', 1) - 1);
  const size_t end = m.find_first_of(" :");
  return m.substr(0, end);
}

// `s` as a JSON string (the walks' text is valid UTF-8: the grammar's).
std::string Quoted(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += static_cast<char>(c);
    else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += static_cast<char>(c);
  }
  return o + "\"";
}

// Plain decode time per token at batch 1 (median of `rounds` runs).
double PlainTpot(llm_ctx* ctx, int rounds) {
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    llm_sampling_params sp;
    llm_sampling_params_init(&sp);
    sp.temperature = 0.8f;
    sp.seed = 7 + static_cast<uint64_t>(r);
    llm_request req;
    llm_request_init(&req);
    req.prompt = "<|im_start|>user\nWrite a JSON configuration file.<|im_end|>\n<|im_start|>assistant\n";
    req.tokenize_flags = LLM_TOKENIZE_PARSE_SPECIAL;
    req.max_tokens = 64;
    req.ignore_eos = true;
    req.sampling = &sp;
    llm_request_id id = 0;
    if (llm_submit(ctx, &req, &id) != LLM_OK) return 0;
    llm_event ev[64];
    for (bool done = false; !done;) {
      ev[0].struct_size = sizeof(llm_event);
      uint32_t got = 0;
      llm_poll(ctx, ev, 64, &got, 1000);
      for (uint32_t k = 0; k < got; ++k) {
        if (ev[k].type != LLM_EVENT_FINAL || ev[k].request_id != id) continue;
        t.push_back(ev[k].metrics.tpot_ms);
        done = true;
      }
    }
  }
  return Quantile(t, 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf";
  const std::string data = argc > 2 ? argv[2] : "tests/data/json_schema_realworld/schemas.jsonl.gz";
  const int walks = argc > 3 ? std::atoi(argv[3]) : 4;
  const int max_tokens = argc > 4 ? std::atoi(argv[4]) : 48;
  const std::string walks_out = argc > 5 ? argv[5] : "";

  gzFile f = gzopen(data.c_str(), "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot read %s\n", data.c_str());
    return 1;
  }
  std::string text;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  gzclose(f);

  struct Entry {
    std::string name, schema;
    std::shared_ptr<const llm::constrain::ByteProgram> program;
  };
  std::vector<Entry> entries;
  std::map<std::string, int> refused_by;
  std::map<std::string, std::string> example;
  std::vector<double> compile_ms;
  int total = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    auto row = llm::ParseJson(line);
    if (!row.ok()) return 1;
    Entry e{row->Find("name")->as_string(), row->Find("schema")->as_string(), nullptr};
    ++total;
    double best = 1e30;
    llm::Status status;
    for (int i = 0; i < 3; ++i) {
      const auto t0 = Clock::now();
      auto p = llm::constrain::CompileConstraint(LLM_CONSTRAINT_JSON_SCHEMA, e.schema, {});
      best = std::min(best, Ms(t0, Clock::now()));
      if (p.ok()) e.program = *p;
      else status = p.status();
      if (!p.ok() || best > 200) break;  // (slow ones once)
    }
    if (e.program == nullptr) {
      const std::string k = KeywordOf(status.message());
      ++refused_by[k];
      example.emplace(k, e.name + ": " + status.message().substr(0, 300));
      std::printf("refused %s (%s): %s\n", e.name.c_str(), status.code() == LLM_ERR_UNSUPPORTED ? "unsupported" : "invalid",
                  status.message().substr(0, 400).c_str());
      continue;
    }
    compile_ms.push_back(best);
    std::printf("compiled %s: %.2f ms\n", e.name.c_str(), best);
    entries.push_back(std::move(e));
  }
  std::printf("\n%d schemas, %zu compiled (%.1f%%)\n", total, entries.size(), 100.0 * entries.size() / std::max(1, total));
  std::vector<std::pair<int, std::string>> by;
  for (const auto& [k, n] : refused_by) by.emplace_back(n, k);
  std::sort(by.rbegin(), by.rend());
  for (const auto& [n, k] : by) std::printf("  refused %3d  %s   e.g. %s\n", n, k.c_str(), example[k].c_str());
  std::printf("compile time (compiled schemas): p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", Quantile(compile_ms, 0.5),
              Quantile(compile_ms, 0.99), Quantile(compile_ms, 1.0));

  // ---- mask cost on the model's vocabulary.
  auto m = llm::Model::Load(model.c_str());
  if (!m.ok()) {
    std::fprintf(stderr, "%s (coverage above; no mask cost)\n", m.status().message().c_str());
    return 0;
  }
  const auto trie = llm::constrain::TokenTrie::FromTokenizer(*(*m)->tokenizer);
  llm_ctx_params cp;
  llm_ctx_params_init(&cp);
  cp.model_path = model.c_str();
  llm_ctx* ctx = nullptr;
  if (llm_ctx_create(&cp, &ctx) != LLM_OK) {
    std::fprintf(stderr, "ctx: %s\n", llm_last_error());
    return 1;
  }
  const double tpot_before = PlainTpot(ctx, 3);
  std::mt19937 rng(29);
  std::vector<double> per_token;
  std::vector<double> per_schema_mean;
  std::vector<std::pair<double, std::string>> worst;  // per schema mean, name
  int completed = 0, walks_total = 0;
  std::ofstream out;
  if (!walks_out.empty()) out.open(walks_out);
  std::vector<float> logits(static_cast<size_t>(trie->n_vocab()));
  for (const Entry& e : entries) {
    auto shared = std::make_shared<llm::constrain::SharedMatcher>(e.program);
    double sum = 0;
    int n = 0;
    for (int w = 0; w < walks; ++w) {
      ++walks_total;
      llm::constrain::ConstraintState state(shared, trie, 0);
      std::vector<int32_t> history;
      std::string produced;
      for (int t = 0; t < max_tokens; ++t) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        const auto t0 = Clock::now();
        state.Apply(logits.data(), trie->n_vocab(), history);
        const double ms = Ms(t0, Clock::now());
        per_token.push_back(ms);
        sum += ms;
        ++n;
        std::vector<int32_t> allowed;
        bool eos = false;
        for (int32_t id = 0; id < trie->n_vocab(); ++id) {
          if (std::isinf(logits[static_cast<size_t>(id)])) continue;
          if (trie->piece(id).empty()) eos = true;
          else allowed.push_back(id);
        }
        if (eos && (allowed.empty() || rng() % 2 == 0)) {
          ++completed;
          if (out) out << "{\"name\":" << Quoted(e.name) << ",\"text\":" << Quoted(produced) << "}\n";
          break;
        }
        if (allowed.empty()) break;
        const int32_t pick = allowed[rng() % allowed.size()];
        history.push_back(pick);
        produced += trie->piece(pick);
      }
    }
    if (n > 0) {
      per_schema_mean.push_back(sum / n);
      worst.emplace_back(sum / n, e.name);
    }
  }
  std::sort(worst.rbegin(), worst.rend());
  for (size_t i = 0; i < worst.size() && i < 5; ++i)
    std::printf("  costliest masks: %s %.3f ms per token\n", worst[i].second.c_str(), worst[i].first);
  const double tpot_after = PlainTpot(ctx, 3);
  llm_ctx_destroy(ctx);
  const double tpot = (tpot_before + tpot_after) / 2;
  double mean = 0;
  for (double x : per_token) mean += x;
  mean /= std::max<size_t>(1, per_token.size());
  std::printf("\nmask per token (first request, %zu tokens over %zu schemas, %d walks each of <= %d tokens):\n",
              per_token.size(), entries.size(), walks, max_tokens);
  std::printf("  p50 %.3f ms, p99 %.3f ms, mean %.3f ms; per schema mean: p50 %.3f ms, p99 %.3f ms\n",
              Quantile(per_token, 0.5), Quantile(per_token, 0.99), mean, Quantile(per_schema_mean, 0.5),
              Quantile(per_schema_mean, 0.99));
  std::printf("  plain decode, batch 1: %.2f ms/token (before %.2f, after %.2f): mean mask %.1f%%, p50 %.1f%%, "
              "schema p99 %.1f%% of it\n",
              tpot, tpot_before, tpot_after, 100 * mean / tpot, 100 * Quantile(per_token, 0.5) / tpot,
              100 * Quantile(per_schema_mean, 0.99) / tpot);
  std::printf("  walks ending complete (EOS allowed and taken): %d of %d\n", completed, walks_total);
  return 0;
}
