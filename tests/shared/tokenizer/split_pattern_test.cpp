#include "shared/tokenizer/split_pattern.h"

#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace k3::tokenizer {
namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

Splitter compile(std::string_view pattern) {
  StatusOr<Splitter> s = Splitter::create_from_pcre2(pattern);
  EXPECT_TRUE(s.ok()) << s.status() << " for " << pattern;
  return *std::move(s);
}

// True when `re` matches the whole one-character string.
bool matches_char(const Splitter& re, const std::string& ch) {
  std::optional<size_t> n = re.match_prefix(ch);
  return n.has_value() && *n == ch.size();
}

std::vector<std::string> split_strings(const Splitter& splitter, std::string_view text) {
  std::vector<std::string_view> pieces;
  splitter.split(text, &pieces);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

using Pieces = std::vector<std::string>;

// The translated classes match exactly "X and not Han", with X and Han as
// separate PCRE2 classes, for every Unicode scalar value (all 17 planes).
TEST(SplitClasses, IntersectionsMatchTheirDefinitionOnEveryCodePoint) {
  const Splitter upper_not_han = compile(split_classes::kUpperNotHan);
  const Splitter lower_not_han = compile(split_classes::kLowerNotHan);
  const Splitter upper = compile(R"([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])");
  const Splitter lower = compile(R"([\p{Ll}\p{Lm}\p{Lo}\p{M}])");
  const Splitter han = compile(split_classes::kHan);
  size_t upper_han = 0, lower_han = 0, upper_kept = 0, lower_kept = 0, mismatches = 0;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;  // not scalar values: no UTF-8 form
    const std::string ch = utf8(cp);
    const bool is_han = matches_char(han, ch);
    const bool is_upper = matches_char(upper, ch);
    const bool is_lower = matches_char(lower, ch);
    const bool want_upper = is_upper && !is_han;
    const bool want_lower = is_lower && !is_han;
    upper_han += is_upper && is_han;
    lower_han += is_lower && is_han;
    upper_kept += want_upper;
    lower_kept += want_lower;
    if (matches_char(upper_not_han, ch) != want_upper ||
        matches_char(lower_not_han, ch) != want_lower) {
      if (++mismatches <= 10) ADD_FAILURE() << "class mismatch at U+" << std::hex << cp;
    }
  }
  EXPECT_EQ(mismatches, 0u);
  // The intersection removes something (all Han ideographs are Lo; 々 is Lm)
  // and keeps the other scripts' letters.
  EXPECT_GT(upper_han, 90000u);
  EXPECT_GT(lower_han, 90000u);
  EXPECT_GT(upper_kept, 30000u);
  EXPECT_GT(lower_kept, 30000u);
}

// Why the pattern says \p{sc:Han} and \p{White_Space}: PCRE2's bare \p{Han}
// (Script_Extensions) and UCP \s differ from Rust's \p{Han} (Script) and \s.
TEST(SplitClasses, HanIsScriptAndSpaceIsWhiteSpace) {
  const Splitter han = compile(split_classes::kHan);
  const Splitter han_scx = compile(R"(\p{Han})");
  EXPECT_TRUE(matches_char(han, utf8(0x4E00)));   // 一
  EXPECT_TRUE(matches_char(han, utf8(0x3005)));   // 々 (Lm, Script=Han)
  EXPECT_TRUE(matches_char(han, utf8(0x20000)));  // 𠀀 (plane 2)
  EXPECT_FALSE(matches_char(han, utf8(0x3006)));  // 〆 Script=Common, scx={Han}
  EXPECT_TRUE(matches_char(han_scx, utf8(0x3006)));
  EXPECT_FALSE(matches_char(han, utf8(0x3001)));  // 、
  EXPECT_FALSE(matches_char(han, utf8(0x3042)));  // あ

  const Splitter white_space = compile(R"(\p{White_Space})");
  const Splitter pcre_space = compile(R"(\s)");
  std::vector<uint32_t> differ;
  for (uint32_t cp = 0; cp < 0x30000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string ch = utf8(cp);
    if (matches_char(white_space, ch) != matches_char(pcre_space, ch)) differ.push_back(cp);
  }
  EXPECT_EQ(differ, std::vector<uint32_t>{0x180E});  // MONGOLIAN VOWEL SEPARATOR (Cf)
  EXPECT_TRUE(matches_char(white_space, utf8(0x85)));
  EXPECT_TRUE(matches_char(white_space, utf8(0x3000)));
}

TEST(SplitPatternSource, UsesTheTranslatedClasses) {
  const std::string_view kimi = split_pattern_source(SplitPattern::kKimi);
  EXPECT_EQ(kimi.find("&&"), std::string_view::npos);
  EXPECT_NE(kimi.find(split_classes::kUpperNotHan), std::string_view::npos);
  EXPECT_NE(kimi.find(split_classes::kLowerNotHan), std::string_view::npos);
  EXPECT_EQ(kimi.substr(0, 11), R"(\p{sc:Han}+)");
  EXPECT_EQ(kimi.find(R"(\s)"), std::string_view::npos);
  const std::string_view o200k = split_pattern_source(SplitPattern::kO200k);
  EXPECT_EQ(o200k.find("Han"), std::string_view::npos);
  EXPECT_NE(o200k.find(R"([\r\n/]*)"), std::string_view::npos);
}

// The expected pieces below (and the split of every code point of planes 0-3
// and 14 in several contexts) were checked against @dqbd/tiktoken 1.0.22,
// tiktoken's Rust core, given Kimi's and o200k's original patterns: they agree
// except on code points that PCRE2 10.42's Unicode 14 tables leave unassigned.
class KimiSplit : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<Splitter> s = Splitter::create(SplitPattern::kKimi);
    ASSERT_TRUE(s.ok()) << s.status();
    splitter_.emplace(*std::move(s));
  }
  Pieces split(std::string_view text) const { return split_strings(*splitter_, text); }
  std::optional<Splitter> splitter_;
};

TEST_F(KimiSplit, WordsAndContractions) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("I'm sure you'll DON'T it's"),
            (Pieces{"I'm", " sure", " you'll", " DON'T", " it's"}));
  EXPECT_EQ(split("HTTPServer camelCase"), (Pieces{"HTTPServer", " camel", "Case"}));
  EXPECT_EQ(split("it'S THEY'RE"), (Pieces{"it'S", " THEY'RE"}));
  // (?i) folds s to ſ (U+017F) in Rust and in PCRE2's UCP mode alike.
  EXPECT_EQ(split("it'ſ"), (Pieces{"it'ſ"}));
  EXPECT_EQ(split("don't've"), (Pieces{"don't", "'ve"}));
}

TEST_F(KimiSplit, HanRunsStandApart) {
  EXPECT_EQ(split("我爱北京abc"), (Pieces{"我爱北京", "abc"}));
  EXPECT_EQ(split("中文English混合"), (Pieces{"中文", "English", "混合"}));
  EXPECT_EQ(split("人々"), (Pieces{"人々"}));  // 々 is Script=Han
  EXPECT_EQ(split("a々"), (Pieces{"a", "々"}));
  EXPECT_EQ(split("a〆"), (Pieces{"a〆"}));  // 〆 is Script=Common
  EXPECT_EQ(split("日本語のテキスト"), (Pieces{"日本語", "のテキスト"}));
  EXPECT_EQ(split("漢字 かな"), (Pieces{"漢字", " かな"}));
  EXPECT_EQ(split(" 中文"), (Pieces{" ", "中文"}));  // the Han rule takes no leading space
}

TEST_F(KimiSplit, NumbersPunctuationAndSpace) {
  EXPECT_EQ(split("12345678"), (Pieces{"123", "456", "78"}));
  EXPECT_EQ(split("v2.0"), (Pieces{"v", "2", ".", "0"}));
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("a \n\n b"), (Pieces{"a", " \n\n", " b"}));
  EXPECT_EQ(split("x\r\ny"), (Pieces{"x", "\r\n", "y"}));
  EXPECT_EQ(split("hello!!!\n\nok"), (Pieces{"hello", "!!!\n\n", "ok"}));
  EXPECT_EQ(split("\tint x;"), (Pieces{"\tint", " x", ";"}));  // a tab may lead a word
  EXPECT_EQ(split("a  "), (Pieces{"a", "  "}));
  EXPECT_EQ(split("a/b"), (Pieces{"a", "/b"}));
  EXPECT_EQ(split("https://k3.example/x?q=1"),
            (Pieces{"https", "://", "k", "3", ".example", "/x", "?q", "=", "1"}));
  // U+180E is not White_Space: with PCRE2's \s it would be taken as space.
  EXPECT_EQ(split("x \u180E\u180E"), (Pieces{"x", " \u180E\u180E"}));
  // U+0085 (NEL) is White_Space.
  EXPECT_EQ(split("x \u0085"), (Pieces{"x", " \u0085"}));
}

TEST_F(KimiSplit, EmojiAndOtherScripts) {
  EXPECT_EQ(split("hi 👨‍👩‍👧 🇩🇪!"),
            (Pieces{"hi", " 👨‍👩‍👧", " 🇩🇪!"}));
  EXPECT_EQ(split("Привет, мир"), (Pieces{"Привет", ",", " мир"}));
  EXPECT_EQ(split("مرحبا بالعالم"), (Pieces{"مرحبا", " بالعالم"}));
  EXPECT_EQ(split("नमस्ते दुनिया"), (Pieces{"नमस्ते", " दुनिया"}));
  EXPECT_EQ(split("안녕하세요 세계"), (Pieces{"안녕하세요", " 세계"}));
}

TEST(O200kSplit, HanIsAnOrdinaryLetter) {
  StatusOr<Splitter> s = Splitter::create(SplitPattern::kO200k);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(split_strings(*s, "中文English混合"), (Pieces{"中文English混合"}));
  EXPECT_EQ(split_strings(*s, "I'm 12345"), (Pieces{"I'm", " ", "123", "45"}));
  EXPECT_EQ(split_strings(*s, "a/b"), (Pieces{"a", "/b"}));
}

std::string random_text(std::mt19937& rng, size_t n_chars) {
  // A mix that exercises every rule, incl. combining marks and astral planes.
  static const std::vector<uint32_t> kAlphabet = {
      'a',     'Z',     'q',    '0',    '7',    ' ',     ' ',    '\n',   '\r',    '\t',    '\'',
      's',     'T',     '.',    '/',    '!',    0xA0,    0x85,   0x180E, 0x3000,  0x2028,  0x0301,
      0x4E2D,  0x6587,  0x3005, 0x3006, 0x3042, 0x30AB,  0x30FC, 0xAC00, 0x0416,  0x03B1,  0x05D0,
      0x0627,  0x0915,  0x094D, 0x0E01, 0x0E31, 0x1F600, 0x200D, 0xFE0F, 0x1F1E9, 0x20000, 0x1D400,
      0x10400, 0xE0100, 0x00C9, 0x00DF, 0x01C5, 0x02B0,  0xFF10, 0x2160};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) s += utf8(kAlphabet[pick(rng)]);
  return s;
}

TEST(SplitCoverage, PiecesCoverTheInputExactly) {
  for (SplitPattern pattern : {SplitPattern::kKimi, SplitPattern::kO200k}) {
    StatusOr<Splitter> s = Splitter::create(pattern);
    ASSERT_TRUE(s.ok()) << s.status();
    std::mt19937 rng(42);
    for (int round = 0; round < 300; ++round) {
      const std::string text = random_text(rng, 1 + round);
      std::vector<std::string_view> pieces;
      s->split(text, &pieces);
      size_t at = 0;
      for (std::string_view p : pieces) {
        ASSERT_FALSE(p.empty());
        ASSERT_EQ(p.data(), text.data() + at) << "pieces must be in order and adjacent";
        at += p.size();
      }
      ASSERT_EQ(at, text.size());
      // Every piece is a whole match of the pattern (nothing was skipped).
      for (std::string_view p : pieces) {
        std::optional<size_t> n = s->match_prefix(p);
        ASSERT_TRUE(n.has_value() && *n == p.size()) << "piece [" << p << "] is not a match";
      }
    }
  }
}

TEST(SplitCoverage, EmptyMatchesAndSkippedTextStillCover) {
  const Splitter a_star = compile("a*");
  EXPECT_EQ(split_strings(a_star, "bab"), (Pieces{"b", "a", "b"}));
  EXPECT_EQ(split_strings(a_star, "ééaa"), (Pieces{"éé", "aa"}));
  const Splitter x = compile("x");
  EXPECT_EQ(split_strings(x, "abc"), (Pieces{"abc"}));
  EXPECT_EQ(split_strings(x, "axbx"), (Pieces{"a", "x", "b", "x"}));
  const Splitter lookahead = compile("(?=b)");
  EXPECT_EQ(split_strings(lookahead, "abb"), (Pieces{"abb"}));
  EXPECT_TRUE(split_strings(x, "").empty());
}

TEST(SplitCoverage, LongRunsDoNotHitTheJitStack) {
  StatusOr<Splitter> s = Splitter::create(SplitPattern::kKimi);
  ASSERT_TRUE(s.ok()) << s.status();
  const size_t n = 1 << 20;
  std::string word = "A" + std::string(n, 'a');
  EXPECT_EQ(split_strings(*s, word + " x"), (Pieces{word, " x"}));
  std::string thai;
  for (size_t i = 0; i < n / 3; ++i) thai += utf8(0x0E01);  // Lo: in both letter classes
  EXPECT_EQ(split_strings(*s, thai + " x"), (Pieces{thai, " x"}));
  std::string han;
  for (size_t i = 0; i < n / 3; ++i) han += utf8(0x4E2D);
  EXPECT_EQ(split_strings(*s, han + "x"), (Pieces{han, "x"}));
  std::string spaces(n, ' ');
  EXPECT_EQ(split_strings(*s, spaces + "x"), (Pieces{spaces.substr(1), " x"}));
  std::string bangs(n, '!');
  EXPECT_EQ(split_strings(*s, bangs + "x"), (Pieces{bangs, "x"}));
  std::string caps(n, 'Q');
  EXPECT_EQ(split_strings(*s, caps + "'s x"), (Pieces{caps + "'s", " x"}));
}

TEST(SplitThreads, OneSplitterManyThreads) {
  StatusOr<Splitter> s = Splitter::create(SplitPattern::kKimi);
  ASSERT_TRUE(s.ok()) << s.status();
  std::mt19937 rng(7);
  const std::string text = random_text(rng, 20000);
  const Pieces want = split_strings(*s, text);
  std::vector<Pieces> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) got[t] = split_strings(*s, text);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Pieces& g : got) EXPECT_EQ(g, want);
}

TEST(SplitUtf8, InvalidTextIsOnePiece) {
  StatusOr<Splitter> s = Splitter::create(SplitPattern::kKimi);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string bad = "ab \xFF cd";
  EXPECT_EQ(split_strings(*s, bad), (Pieces{bad}));
}

TEST(SplitUtf8, Validation) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii text, long enough for the fast path"));
  EXPECT_TRUE(is_valid_utf8("é中😀\u07FF\uFFFF"));
  EXPECT_TRUE(is_valid_utf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\x80"));              // lone continuation
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xE0\x80\xAF"));      // overlong 3-byte
  EXPECT_FALSE(is_valid_utf8("\xF0\x80\x80\xAF"));  // overlong 4-byte
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(is_valid_utf8("\xE4\xB8"));          // truncated
  EXPECT_FALSE(is_valid_utf8("abcdefgh\xE4\xB8"));  // truncated after the fast path
  EXPECT_FALSE(is_valid_utf8("\xE4\x41\xAD"));      // bad continuation
  EXPECT_FALSE(is_valid_utf8(std::string_view("\xF8\x88\x80\x80\x80", 5)));
  // Every scalar value round-trips; every surrogate is refused.
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x30000 ? 1 : 97)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    ASSERT_TRUE(is_valid_utf8(utf8(cp))) << cp;
  }
}

TEST(SplitErrors, BadPatternIsInvalidArgument) {
  StatusOr<Splitter> s = Splitter::create_from_pcre2("[a-");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace k3::tokenizer
