// TextStream: turns a sequence's token pieces into the text the user sees.
//
// It holds back two kinds of tail until the next piece decides them:
//   (a) an incomplete UTF-8 sequence (a character split across tokens), and
//   (b) the longest suffix that could be the start of a stop string,
// and it finds stop strings that span token boundaries.
//
//   pieces:   "Hel"  "lo"  " W"  "or"  "ld"          stop = {" World"}
//   emitted:  "Hel"  "lo"  ""    ""    ""   stopped   (" W", " Wor" held, then dropped)
//
// Everything it returns, concatenated, is valid UTF-8: an invalid byte (a stray
// byte token, a sequence broken by the next piece) becomes U+FFFD, one per byte,
// rather than being held forever.
//
// Stop strings are matched against that sanitised text. When several match,
// the one that ends first wins (then the longest), so the output does not
// depend on where token boundaries fall. One TextStream per sequence; not
// thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace llm {

class TextStream {
 public:
  // Empty stop strings are ignored. Invalid UTF-8 in a stop string is
  // sanitised the same way as the output, so it can still match.
  explicit TextStream(std::vector<std::string> stop_strings);

  // Appends a token's bytes and returns the text now safe to emit (maybe
  // empty). When a stop string completes, *stopped becomes true and the
  // returned text is everything before it; the stop string and anything after
  // it are dropped, and later Push/Flush calls return "". `stopped` may be NULL.
  // The view stays valid until the next call on this object.
  std::string_view Push(std::string_view piece, bool* stopped);

  // End of generation: returns what is held back. A held possible-stop prefix
  // is emitted as is; an incomplete UTF-8 tail is emitted as one U+FFFD. The
  // stream is then empty (a later Push starts afresh, keeping the stop state).
  std::string_view Flush();

  bool stopped() const { return stopped_; }

 private:
  void AppendSanitised(std::string_view bytes);  // to text_
  // Looks for a stop string in text_; on a match truncates text_ to the text
  // before it and sets stopped_. Returns whether it matched.
  bool FindStop();
  size_t HeldStopPrefix() const;  // longest suffix of text_ that starts a stop string
  std::string_view Emit(size_t n);  // moves text_[0, n) to out_

  std::vector<std::string> stops_;
  std::string text_;     // sanitised, not yet emitted
  std::string pending_;  // raw bytes of an incomplete UTF-8 sequence (<= 3)
  std::string scratch_;  // pending_ + piece
  std::string out_;      // what the last call returned
  bool stopped_ = false;
};

}  // namespace llm
