#include "tokenizer/unicode.h"

namespace minfer::unicode {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t utf8_length(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF8) return 4;
  return 1;
}

namespace {

// Shape of a well-formed sequence starting with `lead` (Unicode Table 3-7): number of continuation bytes and
// the allowed range of the first one (the others are always 0x80-0xBF). continuation = -1: invalid lead.
struct LeadInfo {
  int continuation;
  uint8_t lo;
  uint8_t hi;
};

LeadInfo lead_info(uint8_t b) {
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b == 0xE0) return {2, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {2, 0x80, 0xBF};
  if (b == 0xED) return {2, 0x80, 0x9F};  // excludes UTF-16 surrogates
  if (b == 0xF0) return {3, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {3, 0x80, 0xBF};
  if (b == 0xF4) return {3, 0x80, 0x8F};  // nothing above U+10FFFF
  return {-1, 0, 0};
}

// How many bytes of the sequence at pos fit the well-formed shape (1 = only the lead). `complete` tells
// whether all of them fit.
size_t matched_prefix(std::string_view s, size_t pos, const LeadInfo& info, bool* complete) {
  size_t i = 1;
  for (; i <= static_cast<size_t>(info.continuation); ++i) {
    if (pos + i >= s.size()) break;
    const auto c = static_cast<uint8_t>(s[pos + i]);
    const uint8_t lo = i == 1 ? info.lo : 0x80;
    const uint8_t hi = i == 1 ? info.hi : 0xBF;
    if (c < lo || c > hi) break;
  }
  *complete = i == static_cast<size_t>(info.continuation) + 1;
  return i;
}

}  // namespace

size_t valid_char_length(std::string_view s, size_t pos) {
  const auto b = static_cast<uint8_t>(s[pos]);
  if (b < 0x80) return 1;
  const LeadInfo info = lead_info(b);
  if (info.continuation < 0) return 0;
  bool complete = false;
  const size_t n = matched_prefix(s, pos, info, &complete);
  return complete ? n : 0;
}

uint32_t next_codepoint(std::string_view s, size_t& pos) {
  const size_t n = valid_char_length(s, pos);
  if (n == 0) {
    ++pos;
    return kReplacementChar;
  }
  const auto b0 = static_cast<uint8_t>(s[pos]);
  uint32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1Fu) : n == 3 ? (b0 & 0x0Fu) : (b0 & 0x07u);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[pos + i]) & 0x3Fu);
  pos += n;
  return cp;
}

size_t append_sanitized(std::string_view in, std::string& out, bool final) {
  size_t pos = 0;
  while (pos < in.size()) {
    const auto b = static_cast<uint8_t>(in[pos]);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++pos;
      continue;
    }
    const LeadInfo info = lead_info(b);
    if (info.continuation < 0) {
      append_utf8(out, kReplacementChar);
      ++pos;
      continue;
    }
    bool complete = false;
    const size_t n = matched_prefix(in, pos, info, &complete);
    if (complete) {
      out.append(in.substr(pos, n));
    } else if (pos + n >= in.size() && !final) {
      return pos;  // a character that later bytes may still complete
    } else {
      append_utf8(out, kReplacementChar);  // one U+FFFD for the maximal subpart
    }
    pos += n;
  }
  return pos;
}

const ByteLevelTable& byte_level_table() {
  static const ByteLevelTable table = [] {
    ByteLevelTable t;
    t.cp_to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(t.byte_to_utf8[b], cp);
      t.cp_to_byte[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return table;
}

}  // namespace minfer::unicode
