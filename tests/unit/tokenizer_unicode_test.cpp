// UTF-8 repair (the maximal-subpart rule Python and Rust use), its streaming form, and the GPT-2 byte table.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "tokenizer/unicode.h"

namespace minfer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Unicode, SanitizeKeepsValidText) {
  for (const std::string s : {"", "abc", "é", "€", "🦙", "日本語", "a\x00b"}) EXPECT_EQ(unicode::sanitize(s), s);
}

TEST(Unicode, SanitizeReplacesMaximalSubparts) {
  // Same results as bytes.decode("utf-8", "replace") in Python.
  EXPECT_EQ(unicode::sanitize("\xE2\x82"), kFffd);                                  // truncated 3-byte char: one U+FFFD
  EXPECT_EQ(unicode::sanitize("\xF0\x9F\x98"), kFffd);                              // truncated 4-byte char
  EXPECT_EQ(unicode::sanitize("\xC0\xAF"), kFffd + kFffd);                          // overlong: both bytes invalid
  EXPECT_EQ(unicode::sanitize("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // UTF-16 surrogate
  EXPECT_EQ(unicode::sanitize("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(unicode::sanitize("a\x80z"), "a" + kFffd + "z");                        // stray continuation byte
  EXPECT_EQ(unicode::sanitize("\xE2\x82x\xAC"), kFffd + "x" + kFffd);
  EXPECT_EQ(unicode::sanitize("\xFF"), kFffd);
}

TEST(Unicode, StreamingRepairEqualsWholeRepair) {
  std::mt19937 rng(3);
  const std::string alphabet = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99\x80\xBF\xFF\xED\xA0\xC0\xF4\x90";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes;
    const size_t n = rng() % 16;
    for (size_t i = 0; i < n; ++i) bytes += alphabet[rng() % alphabet.size()];
    // Feed in random chunks, as token pieces arrive.
    std::string out;
    std::string pending;
    for (size_t pos = 0; pos < bytes.size();) {
      const size_t len = 1 + rng() % 3;
      pending += bytes.substr(pos, len);
      pos += len;
      const size_t used = unicode::append_sanitized(pending, out, false);
      pending.erase(0, used);
      EXPECT_LE(pending.size(), 3u);
    }
    unicode::append_sanitized(pending, out, true);
    EXPECT_EQ(out, unicode::sanitize(bytes));
  }
}

TEST(Unicode, NextCodepoint) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99\xFF";
  size_t pos = 0;
  EXPECT_EQ(unicode::next_codepoint(s, pos), 'a');
  EXPECT_EQ(unicode::next_codepoint(s, pos), 0xE9u);
  EXPECT_EQ(unicode::next_codepoint(s, pos), 0x20ACu);
  EXPECT_EQ(unicode::next_codepoint(s, pos), 0x1F999u);
  EXPECT_EQ(unicode::next_codepoint(s, pos), unicode::kReplacementChar);
  EXPECT_EQ(pos, s.size());
}

TEST(Unicode, ByteLevelTableIsGpt2s) {
  const auto& t = unicode::byte_level_table();
  std::set<std::string> distinct(t.byte_to_utf8.begin(), t.byte_to_utf8.end());
  EXPECT_EQ(distinct.size(), 256u);
  EXPECT_EQ(t.byte_to_utf8[' '], "\xC4\xA0");   // Ġ U+0120
  EXPECT_EQ(t.byte_to_utf8['\n'], "\xC4\x8A");  // Ċ U+010A
  EXPECT_EQ(t.byte_to_utf8['a'], "a");
  EXPECT_EQ(t.byte_to_utf8[0xAD], "\xC5\x83");  // the soft hyphen is remapped (U+0143)
  for (int b = 0; b < 256; ++b) {
    size_t pos = 0;
    EXPECT_EQ(unicode::byte_level_byte(unicode::next_codepoint(t.byte_to_utf8[static_cast<size_t>(b)], pos)), b);
  }
  EXPECT_EQ(unicode::byte_level_byte(0x4E2D), -1);
}

}  // namespace
}  // namespace minfer
