#include "engine/reasoning_parser.h"

#include <algorithm>
#include <cstdio>

namespace llm {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
// What ends a harmony message's body (<|start|> too: a message the model
// began without closing the one before).
constexpr std::string_view kBodyEnds[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};
// A header longer than this without <|message|> is not harmony markup.
constexpr size_t kMaxHeader = 1024;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t SkipSpace(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

// The length of the longest proper suffix of `s` that begins `tag`.
size_t PartialSuffix(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(s.size(), tag.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

// A JSON string literal of `s` (valid UTF-8 in, as TextStream guarantees).
std::string JsonQuote(std::string_view s) {
  std::string q = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      q += '\\';
      q += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      q += buf;
    } else {
      q += c;
    }
  }
  return q + "\"";
}

// The word after `key` in a harmony header, up to whitespace or "<|".
std::string_view HeaderWord(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + key.size());
  rest.remove_prefix(SkipSpace(rest));
  size_t end = 0;
  while (end < rest.size() && !IsSpace(rest[end]) && rest.substr(end, 2) != "<|") ++end;
  return rest.substr(0, end);
}

}  // namespace

ReasoningFormat ResolveReasoningFormat(ReasoningFormat requested, std::string_view chat_template) {
  if (requested != ReasoningFormat::kAuto) return requested;
  if (chat_template.find(kChannel) != std::string_view::npos) return ReasoningFormat::kHarmony;
  if (chat_template.find(kThinkOpen) != std::string_view::npos) return ReasoningFormat::kDeepSeek;
  return ReasoningFormat::kNone;
}

bool PromptOpensThinking(std::string_view prompt_tail) {
  size_t end = prompt_tail.size();
  while (end > 0 && IsSpace(prompt_tail[end - 1])) --end;
  return prompt_tail.substr(0, end).ends_with(kThinkOpen);
}

bool PromptClosesThinking(std::string_view prompt_tail) {
  size_t end = prompt_tail.size();
  while (end > 0 && IsSpace(prompt_tail[end - 1])) --end;
  return prompt_tail.substr(0, end).ends_with(kThinkClose);
}

ReasoningParser::ReasoningParser(ReasoningFormat format, bool start_in_reasoning) : format_(format) {
  switch (format) {
    case ReasoningFormat::kDeepSeek:
      state_ = start_in_reasoning ? State::kReasoning : State::kStart;
      answer_started_ = false;
      strip_leading_ = start_in_reasoning;
      thought_ = start_in_reasoning;
      break;
    case ReasoningFormat::kHarmony:
      state_ = State::kHeader;  // the prompt ends with "<|start|>assistant"
      answer_started_ = false;
      break;
    default:
      format_ = ReasoningFormat::kNone;
      break;
  }
}

bool ReasoningParser::in_reasoning() const {
  if (format_ == ReasoningFormat::kDeepSeek) return state_ == State::kReasoning;
  if (format_ == ReasoningFormat::kHarmony) return state_ == State::kBody && channel_ == Channel::kAnalysis;
  return false;
}

void ReasoningParser::Push(std::string_view text, ReasoningOut* out) {
  if (format_ == ReasoningFormat::kNone) {
    out->content.append(text);
    return;
  }
  held_.append(text);
  if (format_ == ReasoningFormat::kDeepSeek)
    PushDeepSeek(out);
  else
    PushHarmony(out);
}

void ReasoningParser::EmitReasoning(std::string_view text, bool final_piece, ReasoningOut* out) {
  if (strip_leading_) {
    text.remove_prefix(SkipSpace(text));
    if (text.empty()) return;
    strip_leading_ = false;
  }
  // Trailing whitespace waits: it is dropped if the thinking ends next.
  size_t core = text.size();
  while (core > 0 && IsSpace(text[core - 1])) --core;
  if (core == 0) {
    if (!final_piece) pending_ws_.append(text);
    return;
  }
  out->reasoning += pending_ws_;
  out->reasoning.append(text.substr(0, core));
  pending_ws_.assign(final_piece ? std::string_view{} : text.substr(core));
}

void ReasoningParser::EmitContent(std::string_view text, ReasoningOut* out) {
  if (strip_leading_) {
    text.remove_prefix(SkipSpace(text));
    if (text.empty()) return;
    strip_leading_ = false;
  }
  out->content.append(text);
}

void ReasoningParser::PushDeepSeek(ReasoningOut* out) {
  while (true) {
    switch (state_) {
      case State::kStart: {
        const std::string_view rest = std::string_view(held_).substr(SkipSpace(held_));
        if (rest.empty()) return;  // only whitespace so far
        if (rest.starts_with(kThinkOpen)) {
          held_ = std::string(rest.substr(kThinkOpen.size()));
          state_ = State::kReasoning;
          strip_leading_ = true;
          thought_ = true;
          continue;
        }
        if (kThinkOpen.starts_with(rest)) return;  // "<thi": undecided
        state_ = State::kContent;
        answer_started_ = true;
        out->content += held_;
        held_.clear();
        return;
      }
      case State::kReasoning: {
        const size_t close = held_.find(kThinkClose);
        if (close != std::string::npos) {
          EmitReasoning(std::string_view(held_).substr(0, close), /*final_piece=*/true, out);
          pending_ws_.clear();
          held_.erase(0, close + kThinkClose.size());
          state_ = State::kContent;
          answer_started_ = true;
          strip_leading_ = true;
          continue;
        }
        const size_t keep = PartialSuffix(held_, kThinkClose);
        EmitReasoning(std::string_view(held_).substr(0, held_.size() - keep), false, out);
        held_.erase(0, held_.size() - keep);
        return;
      }
      default:
        EmitContent(held_, out);
        held_.clear();
        return;
    }
  }
}

void ReasoningParser::BeginHarmonyMessage(std::string_view header, ReasoningOut* out) {
  seen_markup_ = true;
  const std::string_view channel = HeaderWord(header, kChannel);
  std::string_view recipient = HeaderWord(header, "to=");
  strip_leading_ = false;
  if (!recipient.empty()) {
    if (recipient.starts_with("functions.")) recipient.remove_prefix(10);
    channel_ = Channel::kToolCall;
    answer_started_ = true;
    out->content += "<tool_call>{\"name\": " + JsonQuote(recipient) + ", \"arguments\": ";
    return;
  }
  if (channel == "analysis") {
    channel_ = Channel::kAnalysis;
    strip_leading_ = true;
    thought_ = true;
    return;
  }
  channel_ = channel == "final" ? Channel::kFinal : Channel::kOther;
  answer_started_ = true;
}

void ReasoningParser::EndHarmonyMessage(ReasoningOut* out) {
  if (channel_ == Channel::kToolCall) out->content += "}</tool_call>";
  if (channel_ == Channel::kAnalysis) {
    pending_ws_.clear();
    if (reasoning_emitted_) separate_reasoning_ = true;
  }
  channel_ = Channel::kOther;
}

void ReasoningParser::EmitHarmonyBody(std::string_view text, bool final_piece, ReasoningOut* out) {
  if (channel_ != Channel::kAnalysis) {
    out->content.append(text);
    return;
  }
  if (separate_reasoning_) {
    // A later analysis message: a blank line between it and the one before.
    std::string_view t = text;
    if (strip_leading_) t.remove_prefix(SkipSpace(t));
    if (t.empty()) return;
    out->reasoning += "\n\n";
    separate_reasoning_ = false;
  }
  const size_t before = out->reasoning.size();
  EmitReasoning(text, final_piece, out);
  if (out->reasoning.size() > before) reasoning_emitted_ = true;
}

void ReasoningParser::PushHarmony(ReasoningOut* out) {
  while (true) {
    switch (state_) {
      case State::kHeader: {
        header_ += held_;
        held_.clear();
        if (!seen_markup_) {
          // Plain text from a model that writes no harmony markup.
          const std::string_view rest = std::string_view(header_).substr(SkipSpace(header_));
          if (rest.empty()) return;
          if (rest[0] != '<' || (rest.size() >= 2 && rest[1] != '|')) {
            state_ = State::kContent;
            answer_started_ = true;
            out->content += header_;
            header_.clear();
            return;
          }
        }
        const size_t msg = header_.find(kMessage);
        if (msg == std::string::npos || msg > kMaxHeader) {
          // Not a header: keep it as text (decided only once a marker
          // starting within the limit would have been whole).
          if (header_.size() > kMaxHeader + kMessage.size()) {
            state_ = State::kContent;
            answer_started_ = true;
            out->content += header_;
            header_.clear();
          }
          return;
        }
        held_ = header_.substr(msg + kMessage.size());
        const std::string header = header_.substr(0, msg);
        header_.clear();
        BeginHarmonyMessage(header, out);
        state_ = State::kBody;
        continue;
      }
      case State::kBody: {
        size_t from = 0;
        while (true) {
          const size_t at = held_.find("<|", from);
          if (at == std::string::npos) {
            // A lone trailing '<' may begin a marker.
            const size_t keep = !held_.empty() && held_.back() == '<' ? 1 : 0;
            EmitHarmonyBody(std::string_view(held_).substr(0, held_.size() - keep), false, out);
            held_.erase(0, held_.size() - keep);
            return;
          }
          const std::string_view tail = std::string_view(held_).substr(at);
          bool partial = false;
          for (std::string_view end : kBodyEnds) {
            if (tail.starts_with(end)) {
              EmitHarmonyBody(std::string_view(held_).substr(0, at), true, out);
              EndHarmonyMessage(out);
              held_.erase(0, at + (end == "<|start|>" ? 0 : end.size()));
              state_ = State::kHeader;
              break;
            }
            if (end.starts_with(tail)) partial = true;
          }
          if (state_ == State::kHeader) break;
          if (partial) {  // "<|en": wait for the rest
            EmitHarmonyBody(std::string_view(held_).substr(0, at), false, out);
            held_.erase(0, at);
            return;
          }
          from = at + 2;  // another marker inside the body: text
        }
        continue;
      }
      default:
        out->content += held_;
        held_.clear();
        return;
    }
  }
}

void ReasoningParser::Finish(ReasoningOut* out) {
  switch (state_) {
    case State::kStart:
      out->content += held_;
      break;
    case State::kReasoning:
      EmitReasoning(held_, /*final_piece=*/true, out);
      break;
    case State::kContent:
      if (format_ == ReasoningFormat::kDeepSeek)
        EmitContent(held_, out);
      else
        out->content += held_;
      break;
    case State::kHeader: {
      // A first header cut short (max_tokens) is markup; other text that
      // merely began with "<|" is the model's.
      const std::string_view rest = std::string_view(header_).substr(SkipSpace(header_));
      auto markup = [&rest](std::string_view m) { return rest.starts_with(m) || m.starts_with(rest); };
      if (!seen_markup_ && !markup(kChannel) && !markup("<|start|>")) {
        answer_started_ = true;
        out->content += header_;
      }
      break;
    }
    case State::kBody:
      EmitHarmonyBody(held_, /*final_piece=*/true, out);
      EndHarmonyMessage(out);
      break;
  }
  held_.clear();
  header_.clear();
  pending_ws_.clear();
  state_ = State::kContent;
  format_ = ReasoningFormat::kNone;  // later pushes: plain content
}

}  // namespace llm
