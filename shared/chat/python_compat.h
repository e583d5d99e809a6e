// The bits of Python behaviour K3's format was defined with (its reference
// encoder is Python): json.dumps output, float repr, and str.strip()'s
// whitespace.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace k3::chat {

enum class JsonStyle {
  // json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True),
  // keys sorted recursively (code point order): the `{JSON}` of CHAT_STRINGS.md.
  kCompactSorted,
  // json.dumps(v, ensure_ascii=False): `, ` and `: `, keys in their order.
  kSpacedOrdered,
};

// `value` as Python's json.dumps writes it in `style`: non-ASCII as UTF-8,
// control characters as \n \r \t \b \f or \u00xx, floats as repr(float).
// (Integers beyond 64 bits, which nlohmann holds as doubles, are the one
// known difference.)
std::string dump_json(const nlohmann::ordered_json& value, JsonStyle style);

// Appends `text` as a JSON string literal (quotes included), json.dumps style.
void append_json_string(std::string_view text, std::string* out);

// repr(float): the shortest digits that round-trip, fixed notation for
// decimal exponents -4 < e <= 16 (with ".0" when integral), else
// d.ddde+XX with at least two exponent digits.
std::string python_float_repr(double value);

// Python's str.isspace() on one code point (what str.strip() removes).
bool is_python_space(char32_t cp);
// str.strip(): `text` without Python whitespace at both ends. UTF-8 in and out.
std::string_view python_strip(std::string_view text);
// True when python_strip(text) is empty.
bool is_blank(std::string_view text);

}  // namespace k3::chat
