// UTF-8 helpers of the tokenizer's API boundary and of its decoders: where text
// stops being valid, lossy decoding of arbitrary token bytes, and the
// incomplete tail a streaming decoder holds back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace k3::tokenizer {

// Byte offset of the first ill-formed sequence in `text` (strict UTF-8: no
// overlong forms, no surrogates, nothing above U+10FFFF, no truncated
// character), or nullopt when the whole text is valid.
std::optional<size_t> first_invalid_utf8(std::string_view text);

// Appends `bytes` to *out as valid UTF-8: each maximal ill-formed subpart
// becomes one U+FFFD (the Unicode "substitution of maximal subparts" practice,
// the same as Python's bytes.decode('utf-8', 'replace') and WHATWG).
void append_utf8_lossy(std::string_view bytes, std::string* out);

// Length of the tail of `bytes` that is a proper prefix of a well-formed UTF-8
// character (0..3 bytes): what a streaming decoder waits on before it can tell
// whether the character completes.
size_t incomplete_utf8_tail(std::string_view bytes);

// Appends code point `cp` (a Unicode scalar value) as UTF-8.
void append_utf8(uint32_t cp, std::string* out);

}  // namespace k3::tokenizer
