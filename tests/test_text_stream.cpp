// TextStream tests: UTF-8 hold-back, stop strings across pieces, Flush,
// invalid bytes, and the invariant that the output is always valid UTF-8.
#include "engine/text_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/utf8.h"

namespace llm {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

struct StreamResult {
  std::vector<std::string> emitted;  // one entry per Push
  std::string text;                  // everything, Flush included
  bool stopped = false;
  int stopped_at = -1;  // index of the piece that completed a stop string
};

StreamResult Feed(std::vector<std::string> stops, const std::vector<std::string>& pieces, bool flush = true) {
  TextStream ts(std::move(stops));
  StreamResult r;
  for (size_t i = 0; i < pieces.size(); ++i) {
    bool stopped = false;
    const std::string_view out = ts.Push(pieces[i], &stopped);
    EXPECT_TRUE(IsValidUtf8(out)) << "piece " << i;
    r.emitted.emplace_back(out);
    r.text += out;
    if (stopped && !r.stopped) r.stopped_at = static_cast<int>(i);
    r.stopped = r.stopped || stopped;
  }
  if (flush) {
    const std::string_view out = ts.Flush();
    EXPECT_TRUE(IsValidUtf8(out));
    r.text += out;
  }
  EXPECT_TRUE(IsValidUtf8(r.text));
  return r;
}

std::vector<std::string> Bytes(const std::string& s) {
  std::vector<std::string> v;
  for (char c : s) v.emplace_back(1, c);
  return v;
}

// ----------------------------------------------------------------- UTF-8

TEST(TextStream, PlainAsciiPassesStraightThrough) {
  const StreamResult r = Feed({}, {"Hello", ",", " world"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"Hello", ",", " world"}));
  EXPECT_EQ(r.text, "Hello, world");
  EXPECT_FALSE(r.stopped);
}

TEST(TextStream, MultiByteCharactersSplitAcrossPieces) {
  // 2-byte é, 3-byte €, 4-byte 😀, each split at every possible point.
  for (const std::string ch : {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"}) {
    for (size_t cut = 1; cut < ch.size(); ++cut) {
      std::string first = "a";  // (appending, not "a" + s: GCC 12 warns falsely on that)
      first += ch.substr(0, cut);
      const StreamResult r = Feed({}, {first, ch.substr(cut) + "b"});
      EXPECT_EQ(r.emitted[0], "a");
      EXPECT_EQ(r.emitted[1], ch + "b");
      EXPECT_EQ(r.text, first.substr(0, 1) + ch + "b");
    }
  }
}

TEST(TextStream, EmojiByteByByte) {
  const std::string emoji = "\xF0\x9F\x8E\x89";  // 🎉
  const StreamResult r = Feed({}, Bytes(emoji + emoji));
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"", "", "", emoji, "", "", "", emoji}));
  EXPECT_EQ(r.text, emoji + emoji);
}

TEST(TextStream, InvalidBytesBecomeReplacementCharacters) {
  // A stray continuation byte, bytes that never start UTF-8, an overlong lead.
  EXPECT_EQ(Feed({}, {"a\x80" "b"}).text, "a" + kFffd + "b");
  EXPECT_EQ(Feed({}, {"\xFF", "\xFE"}).emitted, (std::vector<std::string>{kFffd, kFffd}));
  EXPECT_EQ(Feed({}, {"\xC0\xAF"}).text, kFffd + kFffd);
  // A lead byte whose sequence is broken by the next piece.
  const StreamResult r = Feed({}, {"x\xE2\x82", "y"});
  EXPECT_EQ(r.emitted[0], "x");
  EXPECT_EQ(r.emitted[1], kFffd + kFffd + "y");
  // A surrogate (ED A0 80) is not valid UTF-8.
  EXPECT_TRUE(IsValidUtf8(Feed({}, {"\xED\xA0\x80"}).text));
}

TEST(TextStream, FlushReplacesAnIncompleteTail) {
  TextStream ts({});
  bool stopped = true;
  EXPECT_EQ(ts.Push("ok\xF0\x9F", &stopped), "ok");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(ts.Flush(), kFffd);
  EXPECT_EQ(ts.Flush(), "");  // nothing left
}

// ------------------------------------------------------------ stop strings

TEST(TextStream, StopStringInsideOnePiece) {
  const StreamResult r = Feed({"STOP"}, {"abc", "deSTOPfgh", "more"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stopped_at, 1);
  EXPECT_EQ(r.text, "abcde");
  EXPECT_EQ(r.emitted[2], "");  // pushes after a stop return nothing
}

TEST(TextStream, StopStringSplitAcrossPieces) {
  const StreamResult r = Feed({"</s>"}, {"Once", " upon<", "/", "s", ">tail"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stopped_at, 4);
  EXPECT_EQ(r.emitted[1], " upon");  // "<" held
  EXPECT_EQ(r.emitted[2], "");
  EXPECT_EQ(r.emitted[3], "");
  EXPECT_EQ(r.emitted[4], "");
  EXPECT_EQ(r.text, "Once upon");
}

TEST(TextStream, StopStringByteByByteWithMultiByteCharacters) {
  const std::string stop = "\xE2\x80\x94" "end";  // "—end"
  std::vector<std::string> pieces = Bytes("caf\xC3\xA9 " + stop + " ignored");
  const StreamResult r = Feed({stop}, pieces);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "caf\xC3\xA9 ");
}

TEST(TextStream, FalsePartialMatchIsReleased) {
  const StreamResult r = Feed({"###"}, {"a#", "#", "b", "c"});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"a", "", "##b", "c"}));
  EXPECT_EQ(r.text, "a##bc");
}

TEST(TextStream, OverlappingPartialMatchKeepsTheRightSuffix) {
  // Stop "aab": "aa" is held whole; on a third "a" only the last two can still
  // start a match, so one "a" is released.
  const StreamResult r = Feed({"aab"}, {"a", "a", "a", "b", "x"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emitted[2], "a");
  EXPECT_EQ(r.text, "a");
}

TEST(TextStream, StopStringThatIsAPrefixOfAnother) {
  // "ab" completes first and ends the stream, though "abc" might have followed.
  {
    const StreamResult r = Feed({"abc", "ab"}, {"x", "a", "b", "c"});
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(r.stopped_at, 2);
    EXPECT_EQ(r.text, "x");
  }
  // The longer one held back while it can still match, then released when
  // it cannot; the shorter one is never completed here.
  {
    const StreamResult r = Feed({"abcd", "bd"}, {"a", "b", "c", "x"});
    EXPECT_FALSE(r.stopped);
    EXPECT_EQ(r.emitted, (std::vector<std::string>{"", "", "", "abcx"}));
  }
}

TEST(TextStream, FirstCompletedMatchWins) {
  // "cd" completes before "bcde" does, however the text is cut into pieces.
  EXPECT_EQ(Feed({"cd", "bcde"}, {"abcdef"}).text, "ab");
  EXPECT_EQ(Feed({"cd", "bcde"}, Bytes("abcdef")).text, "ab");
  // Two matches ending together: the longer (earlier) one is cut.
  EXPECT_EQ(Feed({"d", "bcd"}, {"abcdef"}).text, "a");
  EXPECT_EQ(Feed({"d", "bcd"}, Bytes("abcdef")).text, "a");
}

TEST(TextStream, StopAtTheVeryFirstToken) {
  const StreamResult r = Feed({"<|end|>"}, {"<|end|>", "after"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stopped_at, 0);
  EXPECT_EQ(r.text, "");
}

TEST(TextStream, FlushEmitsAHeldStopPrefixAsIs) {
  TextStream ts({"User:"});
  bool stopped = false;
  EXPECT_EQ(ts.Push("Bye. Us", &stopped), "Bye. ");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(ts.Flush(), "Us");
  EXPECT_FALSE(ts.stopped());
}

TEST(TextStream, FlushAfterStopIsEmpty) {
  TextStream ts({"\n\n"});
  bool stopped = false;
  EXPECT_EQ(ts.Push("line\n\nnext", &stopped), "line");
  EXPECT_TRUE(stopped);
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.Flush(), "");
  EXPECT_EQ(ts.Push("x", &stopped), "");
  EXPECT_TRUE(stopped);
}

TEST(TextStream, EmptyStopStringsAreIgnoredAndNullStoppedIsAllowed) {
  TextStream ts({"", "zz"});
  EXPECT_EQ(ts.Push("abc", nullptr), "abc");
  EXPECT_EQ(ts.Push("z", nullptr), "");
  EXPECT_EQ(ts.Push("z", nullptr), "");
  EXPECT_TRUE(ts.stopped());
}

TEST(TextStream, StopStringAfterAnIncompleteCharacter) {
  // The stop string follows a character split across pieces.
  const StreamResult r = Feed({"END"}, {"\xE4\xBD", "\xA0" "E", "N", "D"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emitted[0], "");
  EXPECT_EQ(r.emitted[1], "\xE4\xBD\xA0");  // 你, with "E" held
  EXPECT_EQ(r.text, "\xE4\xBD\xA0");
}

// ------------------------------------------------------------ invariants

TEST(TextStream, RandomPiecesAlwaysGiveValidUtf8AndMatchTheWholeText) {
  // Random byte soup (valid characters, broken ones, stop-like fragments) cut
  // at random points. Without a stop string the output must equal the input
  // sanitised in one go; with one it must equal the sanitised prefix.
  const std::vector<std::string> atoms = {"a", "b", "<", "/", "s", ">", " ", "\xC3\xA9", "\xE2\x82\xAC",
                                          "\xF0\x9F\x98\x80", "\x80", "\xFF", "\xE2", "\xF0\x9F"};
  uint64_t state = 12345;
  auto next = [&state](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::string all;
    const size_t n_atoms = 1 + next(30);
    for (size_t i = 0; i < n_atoms; ++i) all += atoms[next(atoms.size())];
    std::vector<std::string> pieces;
    for (size_t pos = 0; pos < all.size();) {
      const size_t len = 1 + next(5);
      pieces.push_back(all.substr(pos, len));
      pos += len;
    }
    // Reference: one piece holding everything.
    const StreamResult whole = Feed({"</s>"}, {all});
    const StreamResult split = Feed({"</s>"}, pieces);
    ASSERT_EQ(split.text, whole.text) << "trial " << trial;
    ASSERT_EQ(split.stopped, whole.stopped);
    const std::vector<std::string> many = {"s>", "a<", "\xC3\xA9 b", "/s", "\xEF\xBF\xBD" "a"};
    const StreamResult many_whole = Feed(many, {all});
    const StreamResult many_split = Feed(many, pieces);
    ASSERT_EQ(many_split.text, many_whole.text) << "trial " << trial;
    ASSERT_EQ(many_split.stopped, many_whole.stopped);
    const StreamResult nostop_whole = Feed({}, {all});
    const StreamResult nostop_split = Feed({}, pieces);
    ASSERT_EQ(nostop_split.text, nostop_whole.text);
  }
}

}  // namespace
}  // namespace llm
