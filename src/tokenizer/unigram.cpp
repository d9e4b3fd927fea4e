#include "tokenizer/unigram.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/utf8.h"

namespace llm {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"
constexpr double kUnkPenalty = 10.0;                 // SentencePiece's and tokenizers'

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

}  // namespace

StatusOr<std::unique_ptr<Unigram>> Unigram::Create(const TokenizerData& d, const int32_t* byte_ids) {
  auto u = std::unique_ptr<Unigram>(new Unigram(d));
  LLM_ASSIGN_OR_RETURN(u->charsmap_, CharsMap::Parse(d.precompiled_charsmap));
  std::copy(byte_ids, byte_ids + 256, u->byte_ids_);
  double min_score = std::numeric_limits<double>::infinity();
  u->ids_.reserve(d.tokens.size());
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    const int32_t t = d.token_types[i];
    if (t == kTokenNormal) min_score = std::min(min_score, double(d.scores[i]));
    if (d.tokens[i].empty() || (t != kTokenNormal && t != kTokenUserDefined && t != kTokenByte)) continue;
    if (!std::isfinite(d.scores[i])) return ModelFormatError("tokenizer: Unigram piece with a non-finite score");
    u->ids_[d.tokens[i]] = static_cast<int32_t>(i);
    u->max_piece_bytes_ = std::max(u->max_piece_bytes_, d.tokens[i].size());
  }
  u->unk_score_ = (std::isfinite(min_score) ? min_score : 0.0) - kUnkPenalty;
  return u;
}

std::string Unigram::Normalize(std::string_view text) const {
  std::string out;
  if (d_.hf_rules) {
    // Precompiled, then the Replace steps, then Metaspace.
    const std::string s = charsmap_.NormalizeGraphemes(text);
    std::string_view v = s;
    if (d_.spaces == TokenizerData::Spaces::kStripCollapse) {
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    }
    const bool collapse = d_.spaces != TokenizerData::Spaces::kKeep;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != ' ') {
        out.push_back(v[i]);
      } else if (!(collapse && i > 0 && v[i - 1] == ' ')) {
        out.append(kSpace);
      }
    }
    // Metaspace prepends nothing to a text that normalized to nothing.
    if (d_.add_space_prefix && !out.empty() && !StartsWith(out, kSpace)) out.insert(0, kSpace);
    return out;
  }

  // SentencePiece's normalizer, chunk by chunk: a chunk is the charsmap's
  // longest match (or one character) and its replacement.
  const bool remove_extra = d_.spaces != TokenizerData::Spaces::kKeep;
  auto next_chunk = [&](std::string_view in, std::string* buf, size_t* consumed) -> std::string_view {
    std::string_view rep;
    if (charsmap_.Match(in, false, consumed, &rep)) return rep;
    uint32_t cp;
    size_t len;
    const bool ok = DecodeUtf8(in, 0, &cp, &len);
    *consumed = len;
    *buf = ok ? std::string(in.substr(0, len)) : std::string("\xEF\xBF\xBD");
    return *buf;
  };
  std::string buf;
  size_t consumed = 0;
  if (remove_extra) {  // chunks that are exactly " " at the start go
    while (!text.empty()) {
      const std::string_view c = next_chunk(text, &buf, &consumed);
      if (c != " ") break;
      text.remove_prefix(consumed);
    }
  }
  if (text.empty()) return out;
  if (d_.add_space_prefix) out.append(kSpace);
  bool prev_space = remove_extra;
  while (!text.empty()) {
    std::string_view c = next_chunk(text, &buf, &consumed);
    text.remove_prefix(consumed);
    if (prev_space) {
      while (!c.empty() && c.front() == ' ') c.remove_prefix(1);
    }
    if (!c.empty()) {
      for (char ch : c) {
        if (ch == ' ') out.append(kSpace);
        else out.push_back(ch);
      }
      prev_space = c.back() == ' ';
    }
    if (!remove_extra) prev_space = false;
  }
  if (remove_extra) {
    while (EndsWith(out, kSpace)) out.resize(out.size() - kSpace.size());
  }
  return out;
}

void Unigram::Encode(std::string_view text, std::vector<int32_t>* out) const {
  const std::string s = Normalize(text);
  if (!d_.hf_rules) return Viterbi(s, out);
  // Metaspace's split: each "▁" begins a word.
  size_t start = 0;
  for (size_t pos = s.find(kSpace, 1); pos != std::string::npos; pos = s.find(kSpace, pos + 1)) {
    Viterbi(std::string_view(s).substr(start, pos - start), out);
    start = pos;
  }
  Viterbi(std::string_view(s).substr(start), out);
}

// best[e]: the highest-scoring segmentation of s[0, e) (ties: the first
// found, with candidates tried shortest piece first, then [UNK]).
void Unigram::Viterbi(std::string_view s, std::vector<int32_t>* out) const {
  if (s.empty()) return;
  constexpr int32_t kUnknown = -2;
  struct Node {
    double score = 0.0;
    int32_t id = -1;  // -1: not reached yet
    uint32_t start = 0;
  };
  std::vector<Node> best(s.size() + 1);
  best[0].id = kUnknown;  // reached (the value is never read back)
  auto offer = [&](size_t start, size_t end, int32_t id, double piece_score) {
    const double cand = best[start].score + piece_score;
    Node& n = best[end];
    if (n.id == -1 || cand > n.score) n = {cand, id, static_cast<uint32_t>(start)};
  };
  for (size_t pos = 0; pos < s.size();) {
    const size_t char_len = std::min(Utf8SequenceLength(static_cast<unsigned char>(s[pos])), s.size() - pos);
    bool single = false;
    const size_t max_len = std::min(max_piece_bytes_, s.size() - pos);
    for (size_t len = 1; len <= max_len; ++len) {
      if (pos + len < s.size() && (static_cast<unsigned char>(s[pos + len]) & 0xC0) == 0x80) continue;
      auto it = ids_.find(s.substr(pos, len));
      if (it == ids_.end()) continue;
      offer(pos, pos + len, it->second, d_.scores[it->second]);
      if (len == char_len) single = true;
    }
    if (!single) offer(pos, pos + char_len, kUnknown, unk_score_);
    pos += char_len;
  }

  // Back from the end; unknown runs fuse.
  struct Seg {
    int32_t id;
    uint32_t start, end;
  };
  std::vector<Seg> segs;
  for (size_t end = s.size(); end > 0;) {
    const Node& n = best[end];
    if (n.id == kUnknown && !segs.empty() && segs.back().id == kUnknown) segs.back().start = n.start;
    else segs.push_back({n.id, n.start, static_cast<uint32_t>(end)});
    end = n.start;
  }
  for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
    if (it->id != kUnknown) {
      out->push_back(it->id);
      continue;
    }
    const std::string_view bytes = s.substr(it->start, it->end - it->start);
    bool all = d_.byte_fallback;
    for (char c : bytes) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
    if (all) {
      for (char c : bytes) out->push_back(byte_ids_[static_cast<unsigned char>(c)]);
    } else if (d_.unk >= 0) {
      out->push_back(d_.unk);
    }
  }
}

}  // namespace llm
