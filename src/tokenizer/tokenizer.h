// Text <-> token ids, matching llama.cpp's tokenizers (its outputs are our
// test vectors): SentencePiece-style BPE with byte fallback (Llama 2, "spm"),
// byte-level BPE with a per-model pre-tokenizer (GPT-2, Llama 3, Qwen2...),
// WordPiece (BERT: wordpiece.h) and Unigram (SentencePiece UGM, XLM-RoBERTa:
// unigram.h), the last two also against Hugging Face `tokenizers`.
//
// A Tokenizer is immutable after Create(): every const method may be called
// from any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/status.h"

namespace llm {

// Everything a tokenizer needs, as read from a model file. Plain data so the
// loaders (GGUF: model/vocab_gguf.h; tokenizer.json: below) and tests can
// build it independently; the tokenizer knows no model file format.
struct TokenizerData {
  enum class Kind { kSpm, kBpe, kWordPiece, kUnigram };
  Kind kind = Kind::kSpm;
  std::vector<std::string> tokens;   // id -> token text as stored (SPM "▁the", "<0x0A>"; BPE "Ġthe")
  std::vector<float> scores;         // SPM merge scores (may be empty for BPE)
  std::vector<int32_t> token_types;  // GGUF: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;   // BPE: "a b", in rank order
  std::string pre = "default";       // pre-tokenizer name (tokenizer.ggml.pre)
  int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1;
  std::vector<int32_t> eog;          // end-of-generation ids
  bool add_bos = false, add_eos = false;
  // The separator a cross-encoder's pair puts between query and document
  // (GGUF seperator_token_id / add_sep_token; XLM-R's </s>), -1: none.
  int32_t sep = -1;
  bool add_sep = false;
  bool add_space_prefix = true;      // SPM dummy prefix
  bool ignore_merges = false;        // llama3: a pre-token that is a vocab entry is emitted whole
  bool normalize_nfc = false;        // declared by the vocabulary (Qwen); see Tokenizer::Encode

  // WordPiece. Tokens are in llama.cpp's form: a word's first piece carries
  // "▁" ("▁the"), a continuation is bare ("ing" for BERT's "##ing"),
  // bracketed specials ("[CLS]") stay as they are. BOS/EOS are [CLS]/[SEP].
  // The flags are BertNormalizer's.
  bool lowercase = true;
  bool strip_accents = true;     // NFD, then drop nonspacing marks
  bool clean_text = true;        // drop controls, whitespace -> ' '
  bool split_chinese = true;     // CJK ideographs become words of their own
  int32_t max_word_chars = 100;  // longer words are [UNK]

  // Unigram. scores are the pieces' log probabilities; add_space_prefix is
  // the "▁" put before each run of text. Two rule sets: SentencePiece's own
  // (what GGUF files mean; llama.cpp follows it) and the `tokenizers`
  // pipeline a tokenizer.json spells out (unigram.h says where they differ).
  bool hf_rules = false;
  std::string precompiled_charsmap;  // SentencePiece normalizer blob (charsmap.h); empty: none
  enum class Spaces {
    kKeep,           // every ' ' becomes "▁"
    kCollapse,       // runs of ' ' become one (tokenizer.json's Replace " {2,}")
    kStripCollapse,  // also none at the ends (SentencePiece remove_extra_whitespaces)
  };                 // (SentencePiece rules: kKeep or kStripCollapse)
  Spaces spaces = Spaces::kStripCollapse;
  bool byte_fallback = false;  // unknown text as <0xNN> pieces when they all exist
};

enum TokenType : int32_t {
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

// A Hugging Face tokenizer.json (and tokenizer_config.json beside it, if
// present, for bos/eos/add_bos): byte-level BPE, WordPiece (BertNormalizer,
// BertPreTokenizer) and Unigram (Precompiled normalizer, Metaspace).
StatusOr<TokenizerData> TokenizerDataFromHfJson(const std::string& path);

class PreTokenizer;
class WordPiece;
class Unigram;

class Tokenizer {
 public:
  // Validates the data (sizes agree, special ids in range, known pre-tokenizer).
  static StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerData data);
  ~Tokenizer();

  // text must be valid UTF-8 (else LLM_ERR_INVALID_UTF8). add_special:
  // BOS/EOS per add_bos/add_eos. parse_special: control and unknown token
  // texts in `text` become their ids (user-defined tokens always do, as in
  // llama.cpp). SPM and BPE apply no Unicode normalization (llama.cpp does
  // none); WordPiece and Unigram normalize as their vocabulary says.
  StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_special,
                                        bool parse_special) const;

  // Appends the bytes token `id` contributes to the output text. Control and
  // unknown tokens give nothing unless render_special. id must be in range
  // (out-of-range ids append nothing).
  void AppendPiece(int32_t id, bool render_special, std::string* out) const;
  // Concatenated pieces; strip_leading_space removes one leading ' ' from the
  // first non-empty piece (undoing the SPM dummy prefix).
  std::string Decode(std::span<const int32_t> ids, bool render_special,
                     bool strip_leading_space) const;

  int32_t n_vocab() const { return static_cast<int32_t>(data_.tokens.size()); }
  int32_t bos() const { return data_.bos; }
  int32_t eos() const { return data_.eos; }
  bool add_bos() const { return data_.add_bos; }
  bool IsEog(int32_t id) const;
  bool IsControl(int32_t id) const;
  const TokenizerData& data() const { return data_; }
  // Id of an exact token text, or -1.
  int32_t TokenId(std::string_view text) const;
  // The most bytes of input text one token can stand for (its decoded piece
  // or, for a special token, its text): a text of B bytes encodes to at
  // least B / (3 * max_token_bytes()) tokens, NFC normalisation's growth of
  // at most 3x included. Lets a caller refuse a text too long for a context
  // without tokenizing it. WordPiece and Unigram drop text (controls,
  // spaces, what the charsmap deletes), so no such bound holds for them:
  // there it is 2^32 (large, yet 3 * it * n_ctx does not overflow).
  size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  Tokenizer() = default;
  Status Init();
  void EncodeSpm(std::string_view text, std::vector<int32_t>* out) const;
  void EncodeBpe(std::string_view text, std::vector<int32_t>* out) const;
  void EncodeBpeWord(std::string_view word, std::vector<int32_t>* out) const;

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  TokenizerData data_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> token_to_id_;
  // BPE merges: (left id << 32 | right id) -> rank and merged id.
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<int32_t> special_ids_;  // control/user-defined/unknown, longest text first
  int32_t byte_ids_[256];             // byte -> token id (SPM <0xNN>, BPE byte char), -1 if none
  std::vector<std::string> pieces_;   // id -> decoded bytes (precomputed: decode is a copy)
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<WordPiece> wordpiece_;
  std::unique_ptr<Unigram> unigram_;
  size_t max_token_bytes_ = 1;
};

}  // namespace llm
