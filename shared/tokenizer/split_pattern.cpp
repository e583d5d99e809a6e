#include "shared/tokenizer/split_pattern.h"

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace k3::tokenizer {
namespace {

// Rust's `\s` and `\S` (the White_Space property), see the header.
constexpr std::string_view kSpace = R"(\p{White_Space})";
constexpr std::string_view kNotSpace = R"(\P{White_Space})";
constexpr std::string_view kContractions = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)";

// Concatenation of std::string_views (Debian's absl::StrCat takes only
// absl::string_view, which is not std::string_view there).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view part : parts) out.append(part);
  return out;
}

// Rules joined by '|'.
std::string alternation(std::initializer_list<std::string> rules) {
  std::string out;
  for (const std::string& rule : rules) {
    if (!out.empty()) out += '|';
    out += rule;
  }
  return out;
}

constexpr std::string_view kPrefix = R"([^\r\n\p{L}\p{N}]?)";

// Kimi's pattern (K3_MODEL.md, "Tokenizer"), rule by rule:
//   [\p{Han}]+
//   [^\r\n\p{L}\p{N}]?[Lu Lt Lm Lo M &&^Han]*[Ll Lm Lo M &&^Han]+(?i:'s|...)?
//   [^\r\n\p{L}\p{N}]?[Lu Lt Lm Lo M &&^Han]+[Ll Lm Lo M &&^Han]*(?i:'s|...)?
//   \p{N}{1,3}
//    ?[^\s\p{L}\p{N}]+[\r\n]*
//   \s*[\r\n]+
//   \s+(?!\S)
//   \s+
std::string build_kimi_pattern() {
  using split_classes::kHan;
  using split_classes::kLowerNotHan;
  using split_classes::kUpperNotHan;
  return alternation({
      cat({kHan, "+"}),
      cat({kPrefix, kUpperNotHan, "*", kLowerNotHan, "+", kContractions}),
      cat({kPrefix, kUpperNotHan, "+", kLowerNotHan, "*", kContractions}),
      R"(\p{N}{1,3})",
      cat({" ?[^", kSpace, R"(\p{L}\p{N}]+[\r\n]*)"}),
      cat({kSpace, R"(*[\r\n]+)"}),
      cat({kSpace, "+(?!", kNotSpace, ")"}),
      cat({kSpace, "+"}),
  });
}

// OpenAI's o200k_base pattern with the same `\s` translation.
std::string build_o200k_pattern() {
  constexpr std::string_view kUpper = R"([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])";
  constexpr std::string_view kLower = R"([\p{Ll}\p{Lm}\p{Lo}\p{M}])";
  return alternation({
      cat({kPrefix, kUpper, "*", kLower, "+", kContractions}),
      cat({kPrefix, kUpper, "+", kLower, "*", kContractions}),
      R"(\p{N}{1,3})",
      cat({" ?[^", kSpace, R"(\p{L}\p{N}]+[\r\n/]*)"}),
      cat({kSpace, R"(*[\r\n]+)"}),
      cat({kSpace, "+(?!", kNotSpace, ")"}),
      cat({kSpace, "+"}),
  });
}

// Per-thread match state, shared by every Splitter: the patterns have no
// capture groups, so one ovector pair fits them all. The JIT stack starts
// small and may grow (the built-in patterns stay flat; a custom one may not).
class MatchState {
 public:
  MatchState()
      : data_(pcre2_match_data_create(1, nullptr)),
        context_(pcre2_match_context_create(nullptr)),
        jit_stack_(pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr)) {
    if (context_ != nullptr && jit_stack_ != nullptr) {
      pcre2_jit_stack_assign(context_, nullptr, jit_stack_);
    }
  }
  ~MatchState() {
    pcre2_jit_stack_free(jit_stack_);
    pcre2_match_context_free(context_);
    pcre2_match_data_free(data_);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;

  bool ok() const { return data_ != nullptr && context_ != nullptr; }
  pcre2_match_data* data() const { return data_; }
  pcre2_match_context* context() const { return context_; }

 private:
  pcre2_match_data* data_;
  pcre2_match_context* context_;
  pcre2_jit_stack* jit_stack_;
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

// Length of the UTF-8 sequence led by byte `b` (valid text assumed).
size_t utf8_char_len(unsigned char b) {
  if (b < 0x80) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

}  // namespace

struct Splitter::Code {
  explicit Code(pcre2_code* re) : re(re) {}
  ~Code() { pcre2_code_free(re); }
  Code(const Code&) = delete;
  Code& operator=(const Code&) = delete;
  pcre2_code* re;
};

std::string_view split_pattern_source(SplitPattern pattern) {
  // Built once; function-local statics are initialized thread-safely.
  static const std::string* const kKimi = new std::string(build_kimi_pattern());
  static const std::string* const kO200k = new std::string(build_o200k_pattern());
  switch (pattern) {
    case SplitPattern::kKimi:
      return *kKimi;
    case SplitPattern::kO200k:
      return *kO200k;
  }
  return *kKimi;
}

bool is_valid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    // ASCII fast path, 8 bytes at a time.
    if (end - p >= 8) {
      uint64_t word;
      std::memcpy(&word, p, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        p += 8;
        continue;
      }
    }
    const unsigned char b = *p;
    if (b < 0x80) {
      ++p;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
      cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      cp = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      cp = b & 0x07;
    } else {
      return false;  // continuation byte, C0/C1 overlong lead, or F5..FF
    }
    if (static_cast<size_t>(end - p) < len) return false;
    for (size_t i = 1; i < len; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return false;
    if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return false;
    p += len;
  }
  return true;
}

StatusOr<Splitter> Splitter::create(SplitPattern pattern) {
  return create_from_pcre2(split_pattern_source(pattern));
}

StatusOr<Splitter> Splitter::create_from_pcre2(std::string_view pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (re == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("split pattern does not compile at offset ",
                                                   error_offset, ": ",
                                                   reinterpret_cast<const char*>(message)));
  }
  auto code = std::make_shared<const Code>(re);
  // Without JIT support PCRE2 falls back to its interpreter: slower, same results.
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  return Splitter(std::move(code));
}

void Splitter::split(std::string_view utf8_text, std::vector<std::string_view>* pieces) const {
  if (utf8_text.empty()) return;
  MatchState& state = match_state();
  if (!state.ok() || !is_valid_utf8(utf8_text)) {
    pieces->push_back(utf8_text);
    return;
  }
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(utf8_text.data());
  const size_t size = utf8_text.size();
  size_t piece_start = 0;  // start of the text not yet handed out
  size_t search_from = 0;  // where the next match may start
  while (search_from < size) {
    const int rc = pcre2_match(code_->re, subject, size, search_from, PCRE2_NO_UTF_CHECK,
                               state.data(), state.context());
    // No match: the rest is skipped text. An error (a match or JIT stack limit,
    // which the built-in patterns cannot reach) ends the split the same way.
    if (rc < 0) break;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data());
    const size_t match_start = ovector[0];
    const size_t match_end = ovector[1];
    if (match_end <= match_start || match_start < piece_start) {
      // Empty match: step over one character, which joins the skipped text.
      const size_t at = match_start < search_from ? search_from : match_start;
      if (at >= size) break;
      search_from = at + utf8_char_len(static_cast<unsigned char>(utf8_text[at]));
      continue;
    }
    if (match_start > piece_start) {
      pieces->push_back(utf8_text.substr(piece_start, match_start - piece_start));
    }
    pieces->push_back(utf8_text.substr(match_start, match_end - match_start));
    piece_start = search_from = match_end;
  }
  if (piece_start < size) pieces->push_back(utf8_text.substr(piece_start));
}

std::optional<size_t> Splitter::match_prefix(std::string_view utf8_text) const {
  MatchState& state = match_state();
  if (!state.ok()) return std::nullopt;
  const int rc =
      pcre2_match(code_->re, reinterpret_cast<PCRE2_SPTR>(utf8_text.data()), utf8_text.size(), 0,
                  PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, state.data(), state.context());
  if (rc < 0) return std::nullopt;
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data());
  return ovector[1] - ovector[0];
}

}  // namespace k3::tokenizer
