#include "shared/tokenizer/chunking.h"

#include <array>

namespace k3::tokenizer {
namespace {

// is_python_space for the ASCII range, by byte.
constexpr std::array<bool, 128> kAsciiSpace = [] {
  std::array<bool, 128> t{};
  for (int c = 0x09; c <= 0x0D; ++c) t[c] = true;
  for (int c = 0x1C; c <= 0x20; ++c) t[c] = true;
  return t;
}();

}  // namespace

bool is_python_space(uint32_t cp) {
  if (cp < 0x80) return kAsciiSpace[cp];
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

void split_into_chunks(std::string_view utf8_text, std::vector<std::string_view>* chunks) {
  const size_t n = utf8_text.size();
  if (n == 0) return;
  // Fewer bytes than a run may hold: fewer code points too, and fewer than a
  // piece.
  if (n <= kChunkMaxRun) {
    chunks->push_back(utf8_text);
    return;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(utf8_text.data());
  size_t chunk_start = 0;
  size_t in_piece = 0;  // code points of the current piece before i
  size_t run = 0;       // code points of the current run before i (0: none yet)
  bool run_is_space = false;
  auto cut_at = [&](size_t i) {
    chunks->push_back(utf8_text.substr(chunk_start, i - chunk_start));
    chunk_start = i;
  };
  for (size_t i = 0; i < n;) {
    if (in_piece == kChunkPieceCodePoints) {
      // A new piece: the text before it is encoded apart, and the run count
      // starts again.
      cut_at(i);
      in_piece = 0;
      run = 0;
    }
    const unsigned char b = p[i];
    bool space;
    size_t len;
    if (b < 0x80) {
      space = kAsciiSpace[b];
      len = 1;
    } else if (b < 0xE0) {
      space = is_python_space((uint32_t{b} & 0x1F) << 6 | (p[i + 1] & 0x3F));
      len = 2;
    } else if (b < 0xF0) {
      space = is_python_space((uint32_t{b} & 0x0F) << 12 | uint32_t{p[i + 1] & 0x3Fu} << 6 |
                              (p[i + 2] & 0x3F));
      len = 3;
    } else {
      space = false;  // no code point above U+FFFF is a space
      len = 4;
    }
    if (run == 0 || space != run_is_space) {
      run = 1;
      run_is_space = space;
    } else if (++run > kChunkMaxRun) {
      cut_at(i);
      run = 1;
    }
    ++in_piece;
    i += len;
  }
  cut_at(n);
}

}  // namespace k3::tokenizer
