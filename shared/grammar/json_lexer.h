// The character level of strings, one byte at a time, on a Frame's lexer
// fields: well-formed UTF-8 (no overlongs, surrogates or values over
// U+10FFFF) and, inside JSON strings, canonical escapes only (\" \\ \b \f \n
// \r \t, \u00xx in lower case for the other control characters), so every
// decoded string has one spelling. The closing quote is the caller's.
#pragma once

#include <cstdint>

#include "shared/grammar/matcher.h"

namespace k3::grammar {

enum class Lex {
  kChar,  // a code point is complete (*cp)
  kMore,  // taken, the code point goes on
  kReject,
};

// A UTF-8 byte (raw text: any character).
inline Lex lex_utf8(Frame* f, int b, uint32_t* cp) {
  if (b < 0 || b > 0xFF) return Lex::kReject;
  if (f->need > 0) {
    if (b < f->lo || b > f->hi) return Lex::kReject;
    f->cp = (f->cp << 6) | static_cast<uint32_t>(b & 0x3F);
    f->lo = 0x80;
    f->hi = 0xBF;
    if (--f->need > 0) return Lex::kMore;
    *cp = f->cp;
    f->cp = 0;  // equal states have equal bytes
    return Lex::kChar;
  }
  if (b < 0x80) {
    *cp = static_cast<uint32_t>(b);
    return Lex::kChar;
  }
  f->lo = 0x80;
  f->hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    f->need = 1;
    f->cp = static_cast<uint32_t>(b & 0x1F);
  } else if (b >= 0xE0 && b <= 0xEF) {
    f->need = 2;
    f->cp = static_cast<uint32_t>(b & 0x0F);
    if (b == 0xE0) f->lo = 0xA0;
    if (b == 0xED) f->hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    f->need = 3;
    f->cp = static_cast<uint32_t>(b & 0x07);
    if (b == 0xF0) f->lo = 0x90;
    if (b == 0xF4) f->hi = 0x8F;
  } else {
    return Lex::kReject;
  }
  return Lex::kMore;
}

inline Lex lex_raw(Frame* f, int b, uint32_t* cp) {
  return lex_utf8(f, b, cp);
}
inline Lex lex_raw(Frame* f, int b) {
  uint32_t cp;
  return lex_utf8(f, b, &cp);
}

// A byte inside a JSON string (not its closing quote).
inline Lex lex_json(Frame* f, int b, uint32_t* cp) {
  auto hex = [](int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  switch (f->esc) {
    case 0:
      if (f->need == 0) {
        if (b == '\\') {
          f->esc = 1;
          return Lex::kMore;
        }
        if (b < 0x20 || b == '"') return Lex::kReject;
      }
      return lex_utf8(f, b, cp);
    case 1: {
      f->esc = 0;
      switch (b) {
        case '"':
          *cp = '"';
          return Lex::kChar;
        case '\\':
          *cp = '\\';
          return Lex::kChar;
        case 'b':
          *cp = '\b';
          return Lex::kChar;
        case 'f':
          *cp = '\f';
          return Lex::kChar;
        case 'n':
          *cp = '\n';
          return Lex::kChar;
        case 'r':
          *cp = '\r';
          return Lex::kChar;
        case 't':
          *cp = '\t';
          return Lex::kChar;
        case 'u':
          f->esc = 2;
          f->cp = 0;
          return Lex::kMore;
        default:
          return Lex::kReject;
      }
    }
    case 2:
    case 3:
      if (b != '0') return Lex::kReject;
      ++f->esc;
      return Lex::kMore;
    case 4:
      if (b != '0' && b != '1') return Lex::kReject;
      f->cp = static_cast<uint32_t>(b - '0');
      ++f->esc;
      return Lex::kMore;
    default: {  // 5: the last hex digit
      const int h = hex(b);
      if (h < 0) return Lex::kReject;
      const uint32_t v = f->cp * 16 + static_cast<uint32_t>(h);
      // Characters with a short escape never take the \u form.
      if (v == '\b' || v == '\f' || v == '\n' || v == '\r' || v == '\t') return Lex::kReject;
      f->esc = 0;
      f->cp = 0;
      *cp = v;
      return Lex::kChar;
    }
  }
}
inline Lex lex_json(Frame* f, int b) {
  uint32_t cp;
  return lex_json(f, b, &cp);
}

// Bytes the lexer still needs to finish its character (0 at rest).
inline int64_t lex_pending(const Frame& f) {
  if (f.esc == 1) return 1;
  if (f.esc >= 2) return 6 - f.esc;
  return f.need;
}

}  // namespace k3::grammar
