#include "constrain/json_keys.h"

#include "util/utf8.h"

namespace llm::constrain {
namespace {

bool IsSpace(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int HexValue(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 0;  // (the grammar admits only hex digits here)
}

}  // namespace

JsonKeys::JsonKeys() { states_.emplace_back(); }

int JsonKeys::MinQuotesForRepeat() const {
  const State& st = states_.back();
  int q = 2;
  if (st.mode == kKey || st.mode == kKeyEscape || st.mode == kKeyHex) q = 1;
  else if (st.mode == kString || st.mode == kStringEscape) q = 3;
  return st.open_keys > 0 ? q : q + 2;
}

void JsonKeys::FlushHigh(State* st) {
  if (st->high != 0) AppendWtf8(st->high, &st->key);
  st->high = 0;
}

void JsonKeys::Unit(State* st, uint32_t unit) {
  if (st->high != 0 && unit >= 0xDC00 && unit <= 0xDFFF) {
    AppendWtf8(0x10000 + ((st->high - 0xD800u) << 10) + (unit - 0xDC00u), &st->key);
    st->high = 0;
    return;
  }
  FlushHigh(st);
  if (unit >= 0xD800 && unit <= 0xDBFF) st->high = static_cast<uint16_t>(unit);
  else AppendWtf8(unit, &st->key);
}

bool JsonKeys::CloseKey(State* st) {
  FlushHigh(st);
  for (int32_t k = st->keys; k >= 0; k = keys_[static_cast<size_t>(k)].next) {
    if (keys_[static_cast<size_t>(k)].text == st->key) return false;
  }
  keys_.push_back({std::move(st->key), st->keys});
  st->key.clear();
  st->keys = static_cast<int32_t>(keys_.size()) - 1;
  ++st->open_keys;
  st->mode = kColon;
  return true;
}

void JsonKeys::Open(State* st, bool object) {
  frames_.push_back({st->frame, st->keys, st->open_keys, object});
  st->frame = static_cast<int32_t>(frames_.size()) - 1;
  st->keys = -1;
  st->mode = object ? kMemberKey : kValue;
}

void JsonKeys::Close(State* st) {
  if (st->frame >= 0) {
    const Frame& f = frames_[static_cast<size_t>(st->frame)];
    st->frame = f.parent;
    st->keys = f.parent_keys;
    st->open_keys = f.open_keys;
  }
  st->mode = kAfter;
}

bool JsonKeys::Run(State* st, std::string_view bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    const uint8_t c = static_cast<uint8_t>(bytes[i]);
    switch (st->mode) {
      case kValue:
        if (IsSpace(c)) break;
        if (c == '{') Open(st, true);
        else if (c == '[') Open(st, false);
        else if (c == ']') Close(st);  // an empty array
        else if (c == '"') st->mode = kString;
        else st->mode = kScalar;
        break;
      case kMemberKey:
        if (c == '"') {
          st->mode = kKey;
          st->key.clear();
        } else if (c == '}') {
          Close(st);
        }
        break;
      case kKey:
        if (c == '"') {
          if (!CloseKey(st)) return false;
        } else if (c == '\\') {
          st->mode = kKeyEscape;
        } else {
          FlushHigh(st);
          st->key.push_back(static_cast<char>(c));
        }
        break;
      case kKeyEscape:
        if (c == 'u') {
          st->mode = kKeyHex;
          st->hex_left = 4;
          st->unit = 0;
          break;
        }
        FlushHigh(st);
        st->mode = kKey;
        switch (c) {
          case 'b': st->key.push_back('\b'); break;
          case 'f': st->key.push_back('\f'); break;
          case 'n': st->key.push_back('\n'); break;
          case 'r': st->key.push_back('\r'); break;
          case 't': st->key.push_back('\t'); break;
          default: st->key.push_back(static_cast<char>(c)); break;  // " \ /
        }
        break;
      case kKeyHex:
        st->unit = static_cast<uint16_t>(st->unit * 16 + HexValue(c));
        if (--st->hex_left == 0) {
          Unit(st, st->unit);
          st->mode = kKey;
        }
        break;
      case kColon:
        if (c == ':') st->mode = kValue;
        break;
      case kString:
        if (c == '"') st->mode = kAfter;
        else if (c == '\\') st->mode = kStringEscape;
        break;
      case kStringEscape:
        st->mode = kString;  // \uXXXX's digits hold no quote or backslash
        break;
      case kScalar:
        if (!(IsSpace(c) || c == ',' || c == '}' || c == ']')) break;
        st->mode = kAfter;
        [[fallthrough]];
      case kAfter:
        if (c == ',') {
          const bool object = st->frame >= 0 && frames_[static_cast<size_t>(st->frame)].object;
          st->mode = object ? kMemberKey : kValue;
        } else if (c == '}' || c == ']') {
          Close(st);
        }
        break;
    }
  }
  st->n_frames = static_cast<int32_t>(frames_.size());
  st->n_keys = static_cast<int32_t>(keys_.size());
  return true;
}

void JsonKeys::Restore(const State& st) {
  frames_.resize(static_cast<size_t>(st.n_frames));
  keys_.resize(static_cast<size_t>(st.n_keys));
}

bool JsonKeys::Accept(std::string_view bytes) {
  State st = states_.back();
  if (!Run(&st, bytes)) {
    Restore(states_.back());
    return false;
  }
  states_.push_back(std::move(st));
  return true;
}

bool JsonKeys::Allows(std::string_view bytes) {
  State st = states_.back();
  const bool ok = Run(&st, bytes);
  Restore(states_.back());
  return ok;
}

bool JsonKeys::Peek(std::string_view bytes, KeyView* view) {
  State st = states_.back();
  const bool ok = Run(&st, bytes);
  if (ok) {
    view->in_key = st.mode == kKey || st.mode == kKeyEscape || st.mode == kKeyHex;
    view->exact = st.mode == kKey && st.high == 0;
    view->expect_key = st.mode == kMemberKey;
    const bool in_object = st.frame >= 0 && frames_[static_cast<size_t>(st.frame)].object;
    view->after_member = st.mode == kAfter && in_object;
    view->partial = st.key;
    view->keys.clear();
    if (view->in_key || view->expect_key || view->after_member)
      for (int32_t k = st.keys; k >= 0; k = keys_[static_cast<size_t>(k)].next) view->keys.push_back(keys_[static_cast<size_t>(k)].text);
  }
  Restore(states_.back());
  return ok;
}

void JsonKeys::Truncate(size_t n) {
  if (n + 1 >= states_.size()) return;
  states_.resize(n + 1);
  Restore(states_.back());
}

}  // namespace llm::constrain
