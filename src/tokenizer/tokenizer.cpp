// Tokenizer core: validation, special-token splitting, SPM and byte-level BPE
// encoding, decoding. Both algorithms follow llama.cpp's, including its tie
// breaks, because its outputs are the reference vectors.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/pretokenize.h"
#include "tokenizer/unigram.h"
#include "tokenizer/wordpiece.h"
#include "util/utf8.h"

namespace llm {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 "▁"

// GPT-2's byte-level alphabet: every byte maps to a printable code point.
// Printable Latin-1 bytes map to themselves; the other 68 bytes map to
// U+0100.. in byte order.
struct ByteLevel {
  uint32_t byte_to_cp[256];
  std::string byte_to_utf8[256];
  int16_t cp_to_byte[512];  // code points < 512 only; -1 if not in the alphabet

  ByteLevel() {
    uint32_t next = 256;
    for (auto& v : cp_to_byte) v = -1;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      byte_to_cp[b] = printable ? uint32_t(b) : next++;
      cp_to_byte[byte_to_cp[b]] = int16_t(b);
      AppendUtf8(byte_to_cp[b], &byte_to_utf8[b]);
    }
  }
};
const ByteLevel& Bytes() {
  static const ByteLevel b;
  return b;
}

// "<0xNN>" -> NN, or -1.
int ParseByteToken(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

// Byte-level token text -> bytes. Code points outside the alphabet (added
// tokens stored verbatim) are copied as UTF-8.
std::string DecodeByteLevel(std::string_view text) {
  std::string out;
  const ByteLevel& bl = Bytes();
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    size_t len;
    DecodeUtf8(text, i, &cp, &len);
    if (cp < 512 && bl.cp_to_byte[cp] >= 0) {
      out.push_back(static_cast<char>(bl.cp_to_byte[cp]));
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

// A piece of the input after special-token splitting: raw text, or a token.
struct Fragment {
  std::string_view text;  // raw text (when id < 0)
  int32_t id = -1;
};

}  // namespace

Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerData data) {
  auto t = std::unique_ptr<Tokenizer>(new Tokenizer());
  t->data_ = std::move(data);
  LLM_RETURN_IF_ERROR(t->Init());
  return t;
}

Status Tokenizer::Init() {
  TokenizerData& d = data_;
  const size_t n = d.tokens.size();
  if (n == 0) return ModelFormatError("tokenizer: empty vocabulary");
  if (n > static_cast<size_t>(INT32_MAX)) return ModelFormatError("tokenizer: vocabulary too large");
  if (d.scores.empty()) d.scores.assign(n, 0.0f);
  if (d.token_types.empty()) d.token_types.assign(n, kTokenNormal);
  if (d.scores.size() != n) return ModelFormatError("tokenizer: scores and tokens differ in length");
  if (d.token_types.size() != n) {
    return ModelFormatError("tokenizer: token types and tokens differ in length");
  }
  for (int32_t* id : {&d.bos, &d.eos, &d.unk, &d.pad, &d.eot}) {
    if (*id < -1 || *id >= static_cast<int64_t>(n)) {
      return ModelFormatError("tokenizer: special token id " + std::to_string(*id) + " out of range");
    }
  }
  for (int32_t id : d.eog) {
    if (id < 0 || id >= static_cast<int64_t>(n)) return ModelFormatError("tokenizer: eog id out of range");
  }
  if (d.add_bos && d.bos < 0) return ModelFormatError("tokenizer: add_bos without a BOS token");
  if (d.add_eos && d.eos < 0) return ModelFormatError("tokenizer: add_eos without an EOS token");

  // Later duplicates win, as in llama.cpp.
  token_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!d.tokens[i].empty()) token_to_id_[d.tokens[i]] = static_cast<int32_t>(i);
  }

  for (int b = 0; b < 256; ++b) {
    int32_t id = -1;
    if (d.kind != TokenizerData::Kind::kBpe) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", b);
      id = TokenId(buf);
      if (id < 0 && d.kind == TokenizerData::Kind::kSpm) id = TokenId(std::string(1, static_cast<char>(b)));
    } else {
      id = TokenId(Bytes().byte_to_utf8[b]);
    }
    byte_ids_[b] = id;
  }

  if (d.kind == TokenizerData::Kind::kBpe) {
    LLM_ASSIGN_OR_RETURN(pre_, PreTokenizer::Create(d.pre));
    merges_.reserve(d.merges.size());
    for (size_t r = 0; r < d.merges.size(); ++r) {
      const std::string& m = d.merges[r];
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos) return ModelFormatError("tokenizer: malformed merge '" + m + "'");
      const int32_t a = TokenId(std::string_view(m).substr(0, sp));
      const int32_t b = TokenId(std::string_view(m).substr(sp + 1));
      // A merge whose parts or result are not tokens can never produce an
      // emitted token; leaving it out keeps symbols as plain ids.
      std::string joined = m.substr(0, sp) + m.substr(sp + 1);
      const int32_t res = TokenId(joined);
      if (a < 0 || b < 0 || res < 0) continue;
      const uint64_t key = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
      merges_.emplace(key, Merge{static_cast<int32_t>(r), res});  // first (best) rank wins
    }
  }

  if (d.kind == TokenizerData::Kind::kWordPiece) wordpiece_ = std::make_unique<WordPiece>(d);
  if (d.kind == TokenizerData::Kind::kUnigram) {
    LLM_ASSIGN_OR_RETURN(unigram_, Unigram::Create(d, byte_ids_));
  }

  // Texts split out of the input before tokenizing: longest first, so a
  // token that contains another wins (llama.cpp's order).
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = d.token_types[i];
    if ((t == kTokenControl || t == kTokenUserDefined || t == kTokenUnknown) && !d.tokens[i].empty()) {
      special_ids_.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(special_ids_.begin(), special_ids_.end(), [&](int32_t a, int32_t b) {
    return d.tokens[a].size() > d.tokens[b].size();
  });

  pieces_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = d.tokens[i];
    switch (d.token_types[i]) {
      case kTokenNormal:
        pieces_[i] = d.kind == TokenizerData::Kind::kBpe ? DecodeByteLevel(text)
                                                         : ReplaceAll(text, kSpmSpace, " ");
        break;
      case kTokenByte: {
        const int b = ParseByteToken(text);
        if (b >= 0) pieces_[i] = std::string(1, static_cast<char>(b));
        else pieces_[i] = d.kind == TokenizerData::Kind::kBpe ? DecodeByteLevel(text) : text;
        break;
      }
      case kTokenUserDefined: pieces_[i] = text; break;
      default: break;  // control, unknown, unused: nothing unless rendered
    }
    // A special token parsed from the text covers its own text's bytes.
    max_token_bytes_ = std::max({max_token_bytes_, pieces_[i].size(), text.size()});
  }
  // Text may vanish: no bound (2^32 on 64-bit hosts, see the header).
  if (wordpiece_ || unigram_) max_token_bytes_ = size_t{1} << (sizeof(size_t) > 4 ? 32 : 16);
  return Status::Ok();
}

int32_t Tokenizer::TokenId(std::string_view text) const {
  auto it = token_to_id_.find(text);
  return it == token_to_id_.end() ? -1 : it->second;
}

bool Tokenizer::IsEog(int32_t id) const {
  if (id < 0) return false;
  if (id == data_.eos || id == data_.eot) return true;
  return std::find(data_.eog.begin(), data_.eog.end(), id) != data_.eog.end();
}

bool Tokenizer::IsControl(int32_t id) const {
  return id >= 0 && id < n_vocab() && data_.token_types[id] == kTokenControl;
}

StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, bool add_special,
                                                 bool parse_special) const {
  if (!IsValidUtf8(text)) return Status(LLM_ERR_INVALID_UTF8, "tokenize: text is not valid UTF-8");
  std::vector<int32_t> out;

  // Split out special-token texts, one token at a time (longest first),
  // across all raw fragments, as llama.cpp does. Without parse_special only
  // user-defined tokens are split out.
  std::vector<Fragment> frags, next;
  if (!text.empty()) frags.push_back({text, -1});
  for (int32_t id : special_ids_) {
    if (!parse_special && data_.token_types[id] != kTokenUserDefined) continue;
    const std::string& st = data_.tokens[id];
    bool any = false;
    for (const Fragment& f : frags) {
      if (f.id < 0 && f.text.find(st) != std::string_view::npos) {
        any = true;
        break;
      }
    }
    if (!any) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      while (true) {
        const size_t hit = f.text.find(st, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({f.text.substr(pos, hit - pos), -1});
        next.push_back({{}, id});
        pos = hit + st.size();
      }
      if (pos < f.text.size()) next.push_back({f.text.substr(pos), -1});
    }
    frags.swap(next);
  }

  if (add_special && data_.add_bos) out.push_back(data_.bos);
  if (data_.kind == TokenizerData::Kind::kSpm) {
    // Each run of text after the start or a special token gets its own
    // dummy-prefix space.
    bool prev_special = true;
    std::string buf;
    for (const Fragment& f : frags) {
      if (f.id >= 0) {
        out.push_back(f.id);
        prev_special = true;
        continue;
      }
      buf.clear();
      if (data_.add_space_prefix && prev_special) buf.push_back(' ');
      buf.append(f.text);
      EncodeSpm(ReplaceAll(buf, " ", kSpmSpace), &out);
      prev_special = false;
    }
  } else {
    for (const Fragment& f : frags) {
      if (f.id >= 0) out.push_back(f.id);
      else if (wordpiece_) wordpiece_->Encode(f.text, &out);
      else if (unigram_) unigram_->Encode(f.text, &out);
      else EncodeBpe(f.text, &out);
    }
  }
  if (add_special && data_.add_eos) out.push_back(data_.eos);
  return out;
}

// ------------------------------------------------------------------- SPM
// Greedy merging by score: repeatedly join the adjacent pair whose
// concatenation is the highest-scoring vocabulary entry (ties: leftmost),
// using a priority queue with lazy invalidation. Symbols that end up outside
// the vocabulary are emitted as byte tokens.
void Tokenizer::EncodeSpm(std::string_view text, std::vector<int32_t>* out) const {
  struct Sym {
    int32_t prev, next;
    uint32_t start, n;  // byte range in text; n = 0 once merged away
  };
  struct Bigram {
    int32_t left, right;
    float score;
    uint32_t size;
  };
  struct Worse {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };

  std::vector<Sym> syms;
  syms.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = std::min(Utf8SequenceLength(static_cast<unsigned char>(text[i])), text.size() - i);
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({idx - 1, idx + 1, static_cast<uint32_t>(i), static_cast<uint32_t>(len)});
    i += len;
  }
  if (syms.empty()) return;
  syms.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, Worse> queue;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = syms[l].n + syms[r].n;
    const int32_t id = TokenId(text.substr(syms[l].start, size));
    if (id < 0) return;
    queue.push({l, r, data_.scores[id], size});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Sym& l = syms[bg.left];
    Sym& r = syms[bg.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = syms[i].next) {
    const Sym& s = syms[i];
    const std::string_view piece = text.substr(s.start, s.n);
    const int32_t id = TokenId(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t b = byte_ids_[static_cast<unsigned char>(c)];
      if (b >= 0) out->push_back(b);
      else if (data_.unk >= 0) out->push_back(data_.unk);
    }
  }
}

// ------------------------------------------------------------------- BPE
void Tokenizer::EncodeBpe(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<std::string_view> words;
  pre_->Split(text, &words);
  std::string encoded;
  const ByteLevel& bl = Bytes();
  for (std::string_view w : words) {
    encoded.clear();
    for (char c : w) encoded += bl.byte_to_utf8[static_cast<unsigned char>(c)];
    EncodeBpeWord(encoded, out);
  }
}

// Rank-ordered merging inside one pre-token (ties: leftmost), with the same
// lazy-invalidation queue as SPM. Symbols carry their token id; a merge is
// valid only if both sides still have the ids it was queued with.
void Tokenizer::EncodeBpeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (data_.ignore_merges) {
    const int32_t id = TokenId(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  struct Sym {
    int32_t prev, next;
    int32_t id;  // -1: this character is not a token (never merges)
    uint32_t start, n;
  };
  struct Bigram {
    int32_t left, right;
    int32_t rank;
    int32_t left_id, right_id, result;
  };
  struct Worse {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };

  std::vector<Sym> syms;
  syms.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    const size_t len = std::min(Utf8SequenceLength(static_cast<unsigned char>(word[i])), word.size() - i);
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({idx - 1, idx + 1, TokenId(word.substr(i, len)), static_cast<uint32_t>(i),
                    static_cast<uint32_t>(len)});
    i += len;
  }
  if (syms.empty()) return;
  syms.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, Worse> queue;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0 || syms[l].id < 0 || syms[r].id < 0) return;
    const uint64_t key = (uint64_t(uint32_t(syms[l].id)) << 32) | uint32_t(syms[r].id);
    auto it = merges_.find(key);
    if (it == merges_.end()) return;
    queue.push({l, r, it->second.rank, syms[l].id, syms[r].id, it->second.result});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Sym& l = syms[bg.left];
    Sym& r = syms[bg.right];
    if (l.n == 0 || r.n == 0 || l.id != bg.left_id || r.id != bg.right_id || l.next != bg.right) continue;
    l.n += r.n;
    l.id = bg.result;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = syms[i].next) {
    const Sym& s = syms[i];
    if (s.id >= 0) {
      out->push_back(s.id);
      continue;
    }
    // A character with no token of its own: its single bytes, where they are
    // tokens (llama.cpp drops the rest).
    for (char c : word.substr(s.start, s.n)) {
      const int32_t id = TokenId(std::string_view(&c, 1));
      if (id >= 0) out->push_back(id);
    }
  }
}

// ---------------------------------------------------------------- decode
void Tokenizer::AppendPiece(int32_t id, bool render_special, std::string* out) const {
  if (id < 0 || id >= n_vocab()) return;
  const int32_t t = data_.token_types[id];
  if (t == kTokenControl || t == kTokenUnknown) {
    if (render_special) out->append(data_.tokens[id]);
    return;
  }
  out->append(pieces_[id]);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool render_special,
                              bool strip_leading_space) const {
  std::string out;
  bool strip = strip_leading_space;
  for (int32_t id : ids) {
    const size_t before = out.size();
    AppendPiece(id, render_special, &out);
    if (strip && out.size() > before) {
      if (out[before] == ' ') out.erase(before, 1);
      strip = false;
    }
  }
  return out;
}

}  // namespace llm
