// Kimi's chunking of long text. The shipped encoder (tokenization_kimi.py)
// never hands tiktoken a long string whole: it cuts the text into pieces of
// 400,000 code points, then cuts each piece wherever a run of consecutive
// whitespace or non-whitespace code points grows past 25,000, and encodes every
// resulting chunk on its own. The regex split and BPE therefore never span a
// cut, and the ids of long text (base64, minified code, CJK paragraphs, long
// runs of spaces) depend on where the cuts fall.
//
// The rule, in code points (whitespace = Python's str.isspace()):
//   - a piece ends every kChunkPieceCodePoints code points of the text;
//   - within a piece, a run of whitespace or of non-whitespace is cut before
//     its (kChunkMaxRun + 1)-th code point and every kChunkMaxRun after that;
//     the run count starts again in each piece and whenever the class changes;
//   - a chunk may mix whitespace and non-whitespace; no chunk is empty.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace k3::tokenizer {

// TIKTOKEN_MAX_ENCODE_CHARS and MAX_NO_WHITESPACES_CHARS of the reference.
inline constexpr size_t kChunkPieceCodePoints = 400'000;
inline constexpr size_t kChunkMaxRun = 25'000;

// Python's str.isspace() for one code point: U+0009-000D, U+001C-001F, U+0020,
// U+0085, U+00A0, U+1680, U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000.
// (Not Unicode's White_Space: U+001C-001F are in, and U+200B, U+FEFF, U+180E
// are out as there.)
bool is_python_space(uint32_t cp);

// Appends to *chunks the chunks of `utf8_text` (valid UTF-8, unchecked), in
// order; they cover the text exactly. Nothing for empty text; the text itself
// when it has no cut (always so for text of at most kChunkMaxRun bytes). One
// pass, linear in the text's length.
void split_into_chunks(std::string_view utf8_text, std::vector<std::string_view>* chunks);

}  // namespace k3::tokenizer
