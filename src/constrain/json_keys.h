// No duplicate keys in JSON output (issue 29). A context-free grammar cannot
// say "every key of this object differs from the others" (the keys of a
// free-form object are unbounded), so JSON_OBJECT and JSON_SCHEMA programs
// that allow free keys (ByteProgram::unique_keys) carry a second, tiny
// automaton beside the matcher: a JSON lexer over the output that keeps the
// keys written in each open object, unescaped (so "a\/b" repeats "a/b").
// A token whose bytes would close a key that the same open object already
// has is forbidden, at any depth; everything else is the matcher's business
// (the grammar makes the output JSON, so the lexer never validates).
//
//   output  {"a":1,"b":{"a":2},"a"           (the last "a" is refused)
//   frames  [object {a,b}] [object {a}] ...  (persistent lists in arenas:
//           the state after each token is a few ints and the partial key,
//           so rolling back N tokens is dropping N states and truncating)
//
// Engine thread only, one per ConstraintState.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llm::constrain {

class JsonKeys {
 public:
  JsonKeys();

  // Feeds one token's bytes: false (and no change) when they complete a key
  // already written in the same open object.
  bool Accept(std::string_view bytes);
  // Whether Accept(bytes) would succeed; changes nothing.
  bool Allows(std::string_view bytes);
  // Keeps the state after the first n accepted tokens (n <= n_accepted()).
  void Truncate(size_t n);
  size_t n_accepted() const { return states_.size() - 1; }

  // The fewest '"' bytes a token needs to hold before it can complete a
  // repeated key from the current state: 1 inside a key, 3 inside a string
  // value, 2 elsewhere; two more when no open object has a key yet (a
  // repeat then needs two keys in one object). Tokens with fewer quotes
  // need no check (ConstraintState::Mask).
  int MinQuotesForRepeat() const;

  // Where `bytes` would leave the output (nothing changes): inside a key or
  // not, the key so far and the keys its object already has. False when
  // they complete a repeated key. ConstraintState uses it to refuse a
  // token after which every way to close the key repeats one (a dead end:
  // propertyNames {"enum": ["a", "b"]} once "a" and "b" are written).
  struct KeyView {
    bool in_key = false;
    bool expect_key = false;    // in an object, after "{" or ","
    bool after_member = false;  // in an object, after a member's value
    bool exact = true;  // false: inside an escape, the key so far is not known
    std::string partial;
    std::vector<std::string> keys;
  };
  bool Peek(std::string_view bytes, KeyView* view);
  // Some open object has a key: a repeat or a dead end is possible at all.
  bool AnyOpenKeys() const { return states_.back().open_keys > 0; }
  // Inside a string (a key or a value): a ',' there is text, not a member.
  bool InString() const {
    const Mode m = states_.back().mode;
    return m == kString || m == kStringEscape || m == kKey || m == kKeyEscape || m == kKeyHex;
  }

 private:
  enum Mode : uint8_t {
    kValue,      // a value (or, in an array, "]") comes next
    kMemberKey,  // in an object after "{" or ",": a key or "}"
    kKey,        // inside a key
    kKeyEscape,  // after "\" in a key
    kKeyHex,     // inside \uXXXX in a key
    kColon,      // after a key
    kString,     // inside a string value
    kStringEscape,
    kScalar,     // inside a number or literal
    kAfter,      // after a value: "," or a closing bracket
  };
  struct State {
    int32_t frame = -1;        // innermost open container (frames_), -1: none
    int32_t keys = -1;         // its latest key (keys_), -1: none yet
    int32_t n_frames = 0;      // arena sizes when this state was made
    int32_t n_keys = 0;
    int32_t open_keys = 0;     // keys held by open objects, all levels
    Mode mode = kValue;
    uint8_t hex_left = 0;      // \uXXXX digits still to read
    uint16_t unit = 0;         // the UTF-16 unit being read
    uint16_t high = 0;         // a high surrogate waiting for its low half
    std::string key;           // the key so far, unescaped (WTF-8)
  };
  struct Frame {
    int32_t parent;       // the enclosing container's frame
    int32_t parent_keys;  // the enclosing object's latest key when this opened
    int32_t open_keys;    // State::open_keys when this opened
    bool object;
  };
  struct Key {
    std::string text;
    int32_t next;  // the object's previous key, -1: none
  };

  // Runs bytes from *st; false at a repeated key. Appends to the arenas.
  bool Run(State* st, std::string_view bytes);
  void Unit(State* st, uint32_t unit);  // a \u escape's UTF-16 unit
  void FlushHigh(State* st);
  bool CloseKey(State* st);
  void Open(State* st, bool object);
  void Close(State* st);
  void Restore(const State& st);  // truncates the arenas to st's sizes

  std::vector<State> states_;  // (1 + accepted tokens)
  std::vector<Frame> frames_;
  std::vector<Key> keys_;
};

}  // namespace llm::constrain
