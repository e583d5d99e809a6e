// shared/tokenizer/chunking.cpp: where Kimi's encoder cuts long text. The
// expected cuts are worked out by hand from the rule (chunking.h), and come
// from a Python port of it (make_chunk_golden.py) and a naive C++ one; the ids
// of chunked text are cross-checked against tiktoken in crosscheck.sh.
#include "shared/tokenizer/chunking.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "shared/status.h"
#include "shared/tokenizer/utf8.h"
#include "tests/shared/tokenizer/tokenizer_test_util.h"

namespace k3::tokenizer {
namespace {

// The chunks' lengths in code points (valid UTF-8 assumed).
std::vector<size_t> chunk_lengths(std::string_view text) {
  std::vector<std::string_view> chunks;
  split_into_chunks(text, &chunks);
  std::vector<size_t> lengths;
  size_t covered = 0;
  for (std::string_view c : chunks) {
    EXPECT_EQ(c.data(), text.data() + covered) << "chunks cover the text in order";
    covered += c.size();
    size_t cps = 0;
    for (char b : c) cps += (static_cast<unsigned char>(b) & 0xC0) != 0x80;
    lengths.push_back(cps);
  }
  EXPECT_EQ(covered, text.size());
  return lengths;
}

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string utf8(uint32_t cp) {
  std::string out;
  append_utf8(cp, &out);
  return out;
}

using Lengths = std::vector<size_t>;

TEST(Chunking, RulesConstantsAreTheReferences) {
  EXPECT_EQ(kChunkPieceCodePoints, 400'000u);  // TIKTOKEN_MAX_ENCODE_CHARS
  EXPECT_EQ(kChunkMaxRun, 25'000u);            // MAX_NO_WHITESPACES_CHARS
}

TEST(Chunking, ShortTextIsOneChunkAndEmptyTextNone) {
  EXPECT_EQ(chunk_lengths(""), Lengths{});
  EXPECT_EQ(chunk_lengths("hello world"), Lengths{11});
}

TEST(Chunking, ARunIsCutBeforeIts25001stCodePointAndEvery25000After) {
  EXPECT_EQ(chunk_lengths(std::string(25'000, 'a')), Lengths{25'000});
  EXPECT_EQ(chunk_lengths(std::string(25'001, 'a')), (Lengths{25'000, 1}));
  EXPECT_EQ(chunk_lengths(std::string(50'000, 'a')), (Lengths{25'000, 25'000}));
  EXPECT_EQ(chunk_lengths(std::string(50'001, 'a')), (Lengths{25'000, 25'000, 1}));
  EXPECT_EQ(chunk_lengths(std::string(25'000, ' ')), Lengths{25'000});
  EXPECT_EQ(chunk_lengths(std::string(25'001, ' ')), (Lengths{25'000, 1}));
  EXPECT_EQ(chunk_lengths(std::string(60'000, ' ')), (Lengths{25'000, 25'000, 10'000}));
}

TEST(Chunking, CountsCodePointsNotBytes) {
  // 2-, 3- and 4-byte characters: the cut still falls after 25,000 of them.
  for (uint32_t cp : {0xE9u, 0x4E2Du, 0x1F600u}) {
    EXPECT_EQ(chunk_lengths(repeat(utf8(cp), 25'000)), Lengths{25'000}) << cp;
    EXPECT_EQ(chunk_lengths(repeat(utf8(cp), 25'001)), (Lengths{25'000, 1})) << cp;
  }
  // 30,000 bytes of 'é' is only 15,000 code points: no cut.
  EXPECT_EQ(chunk_lengths(repeat(utf8(0xE9), 15'000)), Lengths{15'000});
  // A whitespace run of multi-byte spaces (U+3000).
  EXPECT_EQ(chunk_lengths(repeat(utf8(0x3000), 25'001)), (Lengths{25'000, 1}));
}

TEST(Chunking, AChangeOfClassStartsTheRunAgainAndChunksMixText) {
  // Runs of 20,000 letters between spaces: never more than 25,000 alike.
  EXPECT_EQ(chunk_lengths(repeat(std::string(20'000, 'a') + " ", 3)), Lengths{60'003});
  // 25,000 spaces then 25,001 letters: only the letters' run is cut, and the
  // first chunk holds the spaces and 25,000 letters.
  const std::string text = cat("x", std::string(25'000, ' '), std::string(25'001, 'y'));
  EXPECT_EQ(chunk_lengths(text), (Lengths{1 + 25'000 + 25'000, 1}));
  // After a cut the count restarts at 1 with the cut's code point.
  EXPECT_EQ(chunk_lengths(cat(std::string(25'001, 'a'), " ", std::string(25'001, 'b'))),
            (Lengths{25'000, 1 + 1 + 25'000, 1}));
  // The first code point decides the first run's class: a leading space.
  EXPECT_EQ(chunk_lengths(cat(" ", std::string(25'001, 'a'))), (Lengths{25'001, 1}));
}

TEST(Chunking, PiecesOf400000CodePointsRestartTheRunCount) {
  // Short runs only: the text is cut at 400,000 code points and nowhere else.
  const std::string words = repeat("ab ", 140'000);  // 420,000 code points
  EXPECT_EQ(chunk_lengths(words), (Lengths{400'000, 20'000}));
  EXPECT_EQ(chunk_lengths(words.substr(0, 400'000)), Lengths{400'000});
  EXPECT_EQ(chunk_lengths(words.substr(0, 400'001)), (Lengths{400'000, 1}));
  // A run of 50,000 letters from 380,000 crosses the piece boundary: 20,000 of
  // it end the first piece uncut; in the second piece it counts from 1 again,
  // so the next cut is 25,000 later, at 425,000 (not at 405,000).
  const std::string crossing = words.substr(0, 380'000) + std::string(50'000, 'x') + " end";
  EXPECT_EQ(chunk_lengths(crossing), (Lengths{400'000, 25'000, 5'000 + 4}));
  // The same with a whitespace run, and one that starts right at the boundary.
  const std::string spaces = words.substr(0, 390'000) + std::string(40'000, ' ') + "end";
  EXPECT_EQ(chunk_lengths(spaces), (Lengths{400'000, 25'000, 5'000 + 3}));
  const std::string at_boundary = words.substr(0, 399'999) + "a" + std::string(25'001, 'z');
  EXPECT_EQ(chunk_lengths(at_boundary), (Lengths{400'000, 25'000, 1}));
  // Every piece of a long run: 16 chunks of 25,000 per piece.
  Lengths want(32, 25'000);
  want.push_back(1);
  EXPECT_EQ(chunk_lengths(std::string(800'001, 'a')), want);
}

// The whitespace of Python's str.isspace(), as the issue lists it.
std::set<uint32_t> python_spaces() {
  std::set<uint32_t> s = {0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  for (uint32_t c = 0x09; c <= 0x0D; ++c) s.insert(c);
  for (uint32_t c = 0x1C; c <= 0x1F; ++c) s.insert(c);
  for (uint32_t c = 0x2000; c <= 0x200A; ++c) s.insert(c);
  return s;
}

TEST(Chunking, WhitespaceIsPythonsIsspaceForEveryCodePoint) {
  const std::set<uint32_t> spaces = python_spaces();
  ASSERT_EQ(spaces.size(), 29u);
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    ASSERT_EQ(is_python_space(cp), spaces.contains(cp)) << std::hex << "U+" << cp;
  }
}

TEST(Chunking, EverySpaceBreaksANonSpaceRunAndLookAlikesDoNot) {
  // 20,000 letters, the code point, 10,000 letters: a space keeps both runs
  // short (one chunk); anything else makes one run of 30,001, cut at 25,000.
  auto probe = [](uint32_t cp) {
    return chunk_lengths(std::string(20'000, 'a') + utf8(cp) + std::string(10'000, 'a'));
  };
  for (uint32_t cp : python_spaces()) {
    EXPECT_EQ(probe(cp), Lengths{30'001}) << std::hex << "U+" << cp;
    // ... and a run of it is a whitespace run.
    EXPECT_EQ(chunk_lengths(repeat(utf8(cp), 25'001)), (Lengths{25'000, 1}))
        << std::hex << "U+" << cp;
  }
  // Not spaces for str.isspace() (though some are in \s elsewhere or look
  // blank): zero width space, BOM, Mongolian vowel separator, word joiner,
  // ZWNJ/ZWJ, Hangul filler, braille blank, backspace, escape, DEL, U+FFFD.
  for (uint32_t cp : {0x200Bu, 0xFEFFu, 0x180Eu, 0x2060u, 0x200Cu, 0x200Du, 0x3164u, 0x2800u, 0x08u,
                      0x1Bu, 0x7Fu, 0xFFFDu, 0x1F600u}) {
    EXPECT_EQ(probe(cp), (Lengths{25'000, 5'001})) << std::hex << "U+" << cp;
  }
}

TEST(ChunkingGolden, MatchesThePythonPortOfTheRule) {
  // tests/data/tokenizer/chunk_golden.json, by make_chunk_golden.py (Python's
  // own str.isspace() and slicing).
  const nlohmann::json golden =
      nlohmann::json::parse(k3::testing::read_file(testing::data_path("chunk_golden.json")));
  ASSERT_GE(golden["cases"].size(), 50u);
  for (const auto& c : golden["cases"]) {
    std::string text;
    for (const auto& part : c["parts"]) {
      text += repeat(part[0].get<std::string>(), part[1].get<size_t>());
    }
    EXPECT_EQ(chunk_lengths(text), c["chunks"].get<Lengths>()) << c["name"].get<std::string>();
  }
}

// The rule as the reference states it, over a list of code points: pieces of
// 400,000, then _split_whitespaces_or_nonwhitespaces on each. Chunk lengths.
Lengths naive_chunk_lengths(const std::vector<uint32_t>& cps) {
  const std::set<uint32_t> spaces = python_spaces();
  Lengths out;
  for (size_t p = 0; p < cps.size(); p += 400'000) {
    const size_t end = std::min(cps.size(), p + 400'000);
    size_t slice_start = p;
    size_t len = 0;
    bool is_space = spaces.contains(cps[p]);
    for (size_t i = p; i < end; ++i) {
      const bool now = spaces.contains(cps[i]);
      if (is_space != now) {
        len = 1;
        is_space = now;
      } else if (++len > 25'000) {
        out.push_back(i - slice_start);
        slice_start = i;
        len = 1;
      }
    }
    out.push_back(end - slice_start);
  }
  return out;
}

TEST(Chunking, MatchesANaivePortOfTheRuleOnRandomRuns) {
  // Runs of random class and length (short, near 25,000, over 50,000) drawn
  // from ASCII and multi-byte spaces and text, about 1.2 million code points.
  const std::vector<uint32_t> space_pool = {0x20, 0x0A, 0x09, 0x1C, 0xA0, 0x3000, 0x2028, 0x85};
  const std::vector<uint32_t> text_pool = {'a', 'Z', '7', '+', 0xE9, 0x4E2D, 0x200B, 0x1F600};
  uint64_t x = 88172645463325252ull;
  auto next = [&x](uint64_t n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x % n;
  };
  for (int round = 0; round < 4; ++round) {
    std::vector<uint32_t> cps;
    while (cps.size() < 1'200'000) {
      const auto& pool = next(2) == 0 ? space_pool : text_pool;
      const size_t lengths[] = {1 + next(20), 24'990 + next(20), 1 + next(60'000)};
      for (size_t n = lengths[next(3)]; n > 0; --n) cps.push_back(pool[next(pool.size())]);
    }
    std::string text;
    for (uint32_t cp : cps) append_utf8(cp, &text);
    ASSERT_EQ(chunk_lengths(text), naive_chunk_lengths(cps)) << "round " << round;
  }
}

}  // namespace
}  // namespace k3::tokenizer
