#include "shared/tokenizer/utf8.h"

#include <cstring>

namespace k3::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The well-formed byte sequences of UTF-8 (Unicode 15, table 3-7), by lead
// byte: total length, and the range of the second byte (later bytes are always
// 80..BF). Length 0 marks a byte that cannot start a character.
struct Lead {
  uint8_t length;
  uint8_t second_lo;
  uint8_t second_hi;
};

Lead lead_of(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b >= 0xE1 && b <= 0xEC) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xEE && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes at p[0..n) that form a well-formed prefix of one character
// (at least 1 when the lead byte is valid, 0 when it is not), and whether that
// prefix is a whole character.
size_t valid_prefix(const unsigned char* p, size_t n, bool* complete) {
  const Lead lead = lead_of(p[0]);
  *complete = false;
  if (lead.length == 0) return 0;
  if (lead.length == 1) {
    *complete = true;
    return 1;
  }
  size_t i = 1;
  for (; i < lead.length && i < n; ++i) {
    const unsigned char lo = i == 1 ? lead.second_lo : 0x80;
    const unsigned char hi = i == 1 ? lead.second_hi : 0xBF;
    if (p[i] < lo || p[i] > hi) return i;
  }
  *complete = i == lead.length;
  return i;
}

}  // namespace

std::optional<size_t> first_invalid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (n - i >= 8) {  // ASCII fast path
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    bool complete;
    const size_t len = valid_prefix(p + i, n - i, &complete);
    if (!complete) return i;
    i += len;
  }
  return std::nullopt;
}

void append_utf8_lossy(std::string_view bytes, std::string* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    bool complete;
    const size_t len = valid_prefix(p + i, n - i, &complete);
    if (complete) {
      out->append(bytes.data() + i, len);
      i += len;
    } else {
      out->append(kReplacement);
      i += len == 0 ? 1 : len;  // a maximal subpart, or one stray byte
    }
  }
}

size_t incomplete_utf8_tail(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  // A character is at most 4 bytes, so its lead is among the last 3 bytes.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const Lead lead = lead_of(p[start]);
    if (lead.length == 0) continue;  // a continuation byte (or invalid): look further back
    if (lead.length <= back) return 0;
    bool complete;
    const size_t len = valid_prefix(p + start, back, &complete);
    return len == back ? back : 0;
  }
  return 0;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace k3::tokenizer
