// util::escape: every key, value and path in a message or trace stays on one line.
#include "util/escape.hpp"

#include <gtest/gtest.h>

#include <string>

namespace nxlock::util {
namespace {

using namespace std::string_literals;

TEST(Escape, PrintableTextIsUnchanged) {
  EXPECT_EQ(escape("lock.nightly-backup 1732000061"), "lock.nightly-backup 1732000061");
  EXPECT_EQ(escape(""), "");
  EXPECT_EQ(escape("'quoted' \"too\""), "'quoted' \"too\"");
}

TEST(Escape, ControlBytesAndBackslashBecomeHex) {
  EXPECT_EQ(escape("a\nb"), "a\\x0ab");
  EXPECT_EQ(escape("a\r\tb\x1b[2J"), "a\\x0d\\x09b\\x1b[2J");
  EXPECT_EQ(escape("\0x"s), "\\x00x");
  EXPECT_EQ(escape("\x7f"), "\\x7f");
  EXPECT_EQ(escape("a\\x0ab"), "a\\x5cx0ab");  // a literal backslash never looks like an escape
}

TEST(Escape, WellFormedUtf8IsKept) {
  EXPECT_EQ(escape("café ☃ 𝄞"), "café ☃ 𝄞");
  EXPECT_EQ(escape("→…"), "→…");
}

TEST(Escape, MalformedUtf8BecomesHex) {
  EXPECT_EQ(escape("\xff"), "\\xff");
  EXPECT_EQ(escape("a\xc3"), "a\\xc3");                           // truncated sequence
  EXPECT_EQ(escape("\xc3("), "\\xc3(");                           // bad continuation
  EXPECT_EQ(escape("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(escape("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");           // overlong, 3 bytes
  EXPECT_EQ(escape("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(escape("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(escape("\x80"), "\\x80");                             // a lone continuation byte
}

TEST(Escape, LineBreakingCharactersBecomeHex) {
  EXPECT_EQ(escape("a\u0085b"), "a\\xc2\\x85b");  // NEL, a C1 control
  EXPECT_EQ(escape("a\u2028b"), "a\\xe2\\x80\\xa8b");
  EXPECT_EQ(escape("a\u2029b"), "a\\xe2\\x80\\xa9b");
  EXPECT_EQ(escape("\u00a0"), "\u00a0");  // the first character after C1 is kept
}

TEST(Escape, NeverProducesALineBreakOrInvalidUtf8) {
  // Every 1- and 2-byte input, and each byte before a valid sequence.
  for (int a = 0; a < 256; ++a) {
    for (int b = -1; b < 256; ++b) {
      std::string in(1, static_cast<char>(a));
      if (b >= 0) {
        in += static_cast<char>(b);
      }
      in += "☃";
      const std::string out = escape(in);
      for (const char c : out) {
        const auto byte = static_cast<unsigned char>(c);
        ASSERT_FALSE(byte < 0x20 || byte == 0x7f) << a << " " << b;
      }
      // Nothing but the backslashes it wrote would need escaping again.
      std::string plain = out;
      std::erase(plain, '\\');
      ASSERT_EQ(escape(plain), plain) << a << " " << b;
      ASSERT_EQ(out.substr(out.size() - 3), "☃") << a << " " << b;
    }
  }
}

TEST(Escape, CutsAtACharacterBoundary) {
  EXPECT_EQ(escape("abcdef", 3), "abc…");
  EXPECT_EQ(escape("abc", 3), "abc");
  EXPECT_EQ(escape("ab☃", 3), "ab…");  // the 3-byte character does not fit whole
  EXPECT_EQ(escape("a\nb", 2), "a\\x0a…");
}

}  // namespace
}  // namespace nxlock::util
