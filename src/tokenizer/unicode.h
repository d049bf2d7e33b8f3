// UTF-8 helpers and the GPT-2 byte <-> unicode table used by byte-level BPE.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace minfer::unicode {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Appends the UTF-8 encoding of code point cp (which must be <= 0x10FFFF).
void append_utf8(std::string& out, uint32_t cp);

// Length in bytes of the UTF-8 sequence whose lead byte is b (1 for a stray continuation or invalid byte).
size_t utf8_length(uint8_t lead);

// Decodes the code point at s[pos] and advances pos; an invalid byte gives U+FFFD and advances by one.
uint32_t next_codepoint(std::string_view s, size_t& pos);

// Length of the valid UTF-8 character starting at s[pos], or 0 if the bytes there are not one.
size_t valid_char_length(std::string_view s, size_t pos);

// Appends `in` to `out`, replacing each maximal invalid subpart with U+FFFD (the Unicode / WHATWG rule that
// Python's 'replace' and Rust's from_utf8_lossy follow). With final = false it stops before a trailing,
// still-incomplete character so that a later call with more bytes gives the same result as one call on the
// whole text; returns the number of input bytes consumed.
size_t append_sanitized(std::string_view in, std::string& out, bool final);

inline std::string sanitize(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  append_sanitized(in, out, true);
  return out;
}

// GPT-2's reversible byte -> printable code point mapping (bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to
// themselves, the other 68 to U+0100 upwards), so that every byte string is a string of visible chars.
struct ByteLevelTable {
  std::array<std::string, 256> byte_to_utf8;  // UTF-8 of the code point standing for each byte
  std::array<int16_t, 324> cp_to_byte;        // code point (< 324) -> byte, or -1
};
const ByteLevelTable& byte_level_table();

// The byte a byte-level code point stands for, or -1 if cp is not in the table.
inline int byte_level_byte(uint32_t cp) {
  const auto& t = byte_level_table().cp_to_byte;
  return cp < t.size() ? t[cp] : -1;
}

}  // namespace minfer::unicode
