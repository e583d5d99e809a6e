#include "shared/chat/python_compat.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace k3::chat {
namespace {

using nlohmann::ordered_json;

void dump(const ordered_json& v, JsonStyle style, std::string* out) {
  const bool spaced = style == JsonStyle::kSpacedOrdered;
  switch (v.type()) {
    case ordered_json::value_t::boolean:
      *out += v.get<bool>() ? "true" : "false";
      return;
    case ordered_json::value_t::number_integer:
      *out += std::to_string(v.get<int64_t>());
      return;
    case ordered_json::value_t::number_unsigned:
      *out += std::to_string(v.get<uint64_t>());
      return;
    case ordered_json::value_t::number_float:
      *out += python_float_repr(v.get<double>());
      return;
    case ordered_json::value_t::string:
      append_json_string(v.get_ref<const std::string&>(), out);
      return;
    case ordered_json::value_t::array: {
      *out += '[';
      bool first = true;
      for (const ordered_json& item : v) {
        if (!first) *out += spaced ? ", " : ",";
        first = false;
        dump(item, style, out);
      }
      *out += ']';
      return;
    }
    case ordered_json::value_t::object: {
      std::vector<std::pair<const std::string*, const ordered_json*>> items;
      items.reserve(v.size());
      for (auto it = v.begin(); it != v.end(); ++it) items.emplace_back(&it.key(), &it.value());
      if (style == JsonStyle::kCompactSorted) {
        // std::string compares bytes as unsigned char: UTF-8 byte order is
        // code point order, Python's sort order for str keys.
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return *a.first < *b.first; });
      }
      *out += '{';
      bool first = true;
      for (const auto& [key, value] : items) {
        if (!first) *out += spaced ? ", " : ",";
        first = false;
        append_json_string(*key, out);
        *out += spaced ? ": " : ":";
        dump(*value, style, out);
      }
      *out += '}';
      return;
    }
    default:  // null, binary, discarded
      *out += "null";
      return;
  }
}

// Decodes the code point starting at text[i] (valid UTF-8 assumed; a stray
// byte decodes as itself) and its length.
char32_t decode_at(std::string_view text, size_t i, size_t* len) {
  const auto b = static_cast<unsigned char>(text[i]);
  size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (i + n > text.size()) n = 1;
  char32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  *len = n;
  return cp;
}

}  // namespace

std::string dump_json(const nlohmann::ordered_json& value, JsonStyle style) {
  std::string out;
  dump(value, style, &out);
  return out;
}

void append_json_string(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  *out += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          *out += "\\u00";
          *out += kHex[(c >> 4) & 0xF];
          *out += kHex[c & 0xF];
        } else {
          *out += c;
        }
    }
  }
  *out += '"';
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  // The shortest round-trip digits, from scientific notation "d.ddde[+-]x".
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));
  std::string sign;
  if (!sci.empty() && sci[0] == '-') {
    sign = "-";
    sci.remove_prefix(1);
  }
  const size_t e_at = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_at)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::atoi(std::string(sci.substr(e_at + 1)).c_str());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  // value = 0.DIGITS * 10^decpt
  const int decpt = exponent + 1;
  const int n = static_cast<int>(digits.size());
  std::string out = sign;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt));
      out += '.';
      out += digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits[0];
  if (n > 1) {
    out += '.';
    out += digits.substr(1);
  }
  const int e = decpt - 1;
  out += e < 0 ? "e-" : "e+";
  const int mag = std::abs(e);
  if (mag < 10) out += '0';
  out += std::to_string(mag);
  return out;
}

bool is_python_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string_view python_strip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t len;
    if (!is_python_space(decode_at(text, begin, &len))) break;
    begin += len;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t len;
    if (!is_python_space(decode_at(text, start, &len))) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

bool is_blank(std::string_view text) {
  return python_strip(text).empty();
}

}  // namespace k3::chat
