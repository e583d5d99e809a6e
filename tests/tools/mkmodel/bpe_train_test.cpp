#include "tools/mkmodel/bpe_train.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "shared/tokenizer/split_pattern.h"
#include "tools/mkmodel/corpus.h"

namespace k3::tools {
namespace {

// tiktoken's byte_pair_merge, written out naively: start from single bytes and
// repeatedly merge the adjacent pair whose concatenation has the lowest rank
// (the leftmost on a tie) until no adjacent concatenation is a rank. Returns
// the ranks. Deliberately leaves out tiktoken's shortcut for a piece that is
// itself a rank, so it tests the merge path.
std::vector<uint32_t> rank_bpe(const std::unordered_map<std::string, uint32_t>& rank_of,
                               const std::string& bytes) {
  std::vector<std::string> parts;
  for (char c : bytes) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    uint32_t best = std::numeric_limits<uint32_t>::max();
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = rank_of.find(parts[i] + parts[i + 1]);
      if (it != rank_of.end() && it->second < best) {
        best = it->second;
        best_at = i;
      }
    }
    if (best == std::numeric_limits<uint32_t>::max()) break;
    parts[best_at] += parts[best_at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  std::vector<uint32_t> ids;
  for (const std::string& p : parts) ids.push_back(rank_of.at(p));
  return ids;
}

std::unordered_map<std::string, uint32_t> rank_map(const std::vector<std::string>& ranks) {
  std::unordered_map<std::string, uint32_t> rank_of;
  for (size_t i = 0; i < ranks.size(); ++i) rank_of.emplace(ranks[i], static_cast<uint32_t>(i));
  return rank_of;
}

// Checks the invariants every trained vocabulary must hold.
void expect_valid_vocabulary(const std::vector<std::string>& ranks) {
  ASSERT_GE(ranks.size(), 256u);
  for (int b = 0; b < 256; ++b) ASSERT_EQ(ranks[b], std::string(1, static_cast<char>(b)));
  const auto rank_of = rank_map(ranks);
  ASSERT_EQ(rank_of.size(), ranks.size()) << "ranks must be distinct";
  size_t unreachable = 0;
  for (size_t r = 256; r < ranks.size(); ++r) {
    ASSERT_GE(ranks[r].size(), 2u);
    const std::vector<uint32_t> ids = rank_bpe(rank_of, ranks[r]);
    if (ids != std::vector<uint32_t>{static_cast<uint32_t>(r)}) {
      if (++unreachable <= 5) {
        ADD_FAILURE() << "rank " << r << " [" << absl::CHexEscape(ranks[r]) << "] encodes to "
                      << ids.size() << " tokens";
      }
    }
  }
  EXPECT_EQ(unreachable, 0u);
}

std::vector<std::string> train(const PieceCounts& pieces, size_t n_ranks,
                               BpeTrainStats* stats = nullptr) {
  StatusOr<std::vector<std::string>> ranks = train_bpe_ranks(pieces, n_ranks, stats);
  EXPECT_TRUE(ranks.ok()) << ranks.status();
  return ranks.ok() ? *std::move(ranks) : std::vector<std::string>{};
}

std::vector<std::string> tail(const std::vector<std::string>& ranks) {
  return std::vector<std::string>(ranks.begin() + 256, ranks.end());
}

TEST(BpeTrain, BytesComeFirstInOrder) {
  const std::vector<std::string> ranks = train({}, 300);
  ASSERT_EQ(ranks.size(), 256u);  // nothing to learn
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ranks[b], std::string(1, static_cast<char>(b)));
}

TEST(BpeTrain, MergesTheMostFrequentPairFirst) {
  // (a,b): 3*2 + 1 = 7, (b,a): 3. Then "abab" is (ab,ab) three times.
  BpeTrainStats stats;
  const std::vector<std::string> ranks = train({{"abab", 3}, {"ab", 1}}, 1000, &stats);
  EXPECT_EQ(tail(ranks), (std::vector<std::string>{"ab", "abab"}));
  EXPECT_EQ(stats.merges, 2u);
  EXPECT_EQ(stats.last_count, 3u);
  EXPECT_EQ(stats.ranks, ranks.size());
}

TEST(BpeTrain, TiesGoToTheLowestRanks) {
  // Three pairs occur twice each; (p,q) has the lowest ranks. Then (x,y) has
  // lower ranks than (pq,r).
  const std::vector<std::string> ranks = train({{"xy", 2}, {"pqr", 2}}, 257);
  EXPECT_EQ(tail(ranks), (std::vector<std::string>{"pq"}));
  const std::vector<std::string> all = train({{"xy", 2}, {"pqr", 2}}, 1000);
  EXPECT_EQ(tail(all), (std::vector<std::string>{"pq", "xy", "pqr"}));
}

TEST(BpeTrain, StopsWhenNoPairOccursTwice) {
  EXPECT_EQ(train({{"abc", 1}, {"xyz", 1}}, 1000).size(), 256u);
  EXPECT_EQ(tail(train({{"abc", 2}}, 1000)), (std::vector<std::string>{"ab", "abc"}));
}

TEST(BpeTrain, RepeatedBytesCountWithoutOverlap) {
  // "aaaa" holds (a,a) three times, but merges to [aa, aa]; then (aa,aa) once
  // per word: twice in all.
  const std::vector<std::string> ranks = train({{"aaaa", 2}}, 1000);
  EXPECT_EQ(tail(ranks), (std::vector<std::string>{"aa", "aaaa"}));
  // "aaa": (a,a) twice per word -> [aa, a]; (aa,a) once per word.
  EXPECT_EQ(tail(train({{"aaa", 2}}, 1000)), (std::vector<std::string>{"aa", "aaa"}));
}

TEST(BpeTrain, CountsAreWeightedByPieceFrequency) {
  // "xy" once in a piece seen 5 times beats "ab" twice in a piece seen twice.
  EXPECT_EQ(tail(train({{"xy", 5}, {"abab", 2}}, 257)), (std::vector<std::string>{"xy"}));
}

TEST(BpeTrain, RefusesTooFewRanks) {
  StatusOr<std::vector<std::string>> ranks = train_bpe_ranks({}, 255);
  ASSERT_FALSE(ranks.ok());
  EXPECT_EQ(ranks.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BpeTrain, RefusesInvalidUtf8Text) {
  StatusOr<std::vector<std::string>> ranks = train_bpe_ranks_from_text("ab\xC0\xAF", 300);
  ASSERT_FALSE(ranks.ok());
  EXPECT_EQ(ranks.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BpeTrain, CountPiecesUsesKimiSplit) {
  StatusOr<PieceCounts> counts = count_pieces("the cat, the hat 中文 the");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(
      *counts,
      (PieceCounts{
          {"the", 1}, {" the", 2}, {" cat", 1}, {",", 1}, {" hat", 1}, {" ", 1}, {"中文", 1}}));
}

// Random words over a tiny alphabet give many overlapping merges: the case
// where plain pair counting can create ranks that rank-BPE never reaches.
TEST(BpeTrain, EveryRankIsReachableOnRandomWords) {
  std::mt19937 rng(1234);
  size_t total_refused = 0;
  for (int round = 0; round < 20; ++round) {
    PieceCounts pieces;
    std::uniform_int_distribution<int> len(2, 12);
    std::uniform_int_distribution<int> letter(0, 2 + round % 3);
    std::uniform_int_distribution<int> count(1, 9);
    for (int w = 0; w < 300; ++w) {
      std::string word;
      const int n = len(rng);
      for (int i = 0; i < n; ++i) word += static_cast<char>('a' + letter(rng));
      pieces[word] += count(rng);
    }
    BpeTrainStats stats;
    const std::vector<std::string> ranks = train(pieces, 256 + 400, &stats);
    total_refused += stats.unreachable;
    expect_valid_vocabulary(ranks);
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
  std::printf("random words: %zu pairs refused as unreachable\n", total_refused);
}

TEST(BpeTrain, Deterministic) {
  StatusOr<std::vector<std::string>> a = train_bpe_ranks_from_text(embedded_corpus(), 1500);
  StatusOr<std::vector<std::string>> b = train_bpe_ranks_from_text(embedded_corpus(), 1500);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  // A larger budget extends the same sequence.
  StatusOr<std::vector<std::string>> c = train_bpe_ranks_from_text(embedded_corpus(), 2000);
  ASSERT_TRUE(c.ok());
  ASSERT_GE(c->size(), a->size());
  EXPECT_TRUE(std::equal(a->begin(), a->end(), c->begin()));
}

TEST(BpeTrain, CorpusTrainsThousandsOfReachableRanksQuickly) {
  const auto start = std::chrono::steady_clock::now();
  BpeTrainStats stats;
  StatusOr<std::vector<std::string>> ranks =
      train_bpe_ranks_from_text(embedded_corpus(), 4096, &stats);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  std::printf(
      "corpus %zu bytes, %zu distinct pieces: %zu ranks (%zu merges, %zu re-merges, %zu "
      "refused, last count %llu) in %.3f s\n",
      embedded_corpus().size(), stats.distinct_pieces, ranks->size(), stats.merges, stats.remerges,
      stats.unreachable, static_cast<unsigned long long>(stats.last_count), seconds);
  EXPECT_GE(ranks->size(), 3000u);
  EXPECT_LE(ranks->size(), 4096u);
  EXPECT_LT(seconds, 20.0);  // typically well under a second; generous for sanitizers
  expect_valid_vocabulary(*ranks);
  // Common pieces of several scripts became single ranks.
  const auto rank_of = rank_map(*ranks);
  for (const char* piece : {" the", " station", " и", "的", " de"}) {
    EXPECT_TRUE(rank_of.count(piece)) << piece;
  }
}

TEST(TiktokenModel, OneBase64LinePerRank) {
  const std::vector<std::string> ranks = {"!", "ab", std::string("\0\xFF", 2), "中文"};
  EXPECT_EQ(tiktoken_model_text(ranks), "IQ== 0\nYWI= 1\nAP8= 2\n5Lit5paH 3\n");
  EXPECT_EQ(tiktoken_model_text({}), "");
}

TEST(TiktokenModel, RoundTripsATrainedVocabulary) {
  StatusOr<std::vector<std::string>> ranks = train_bpe_ranks_from_text(embedded_corpus(), 1000);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  std::istringstream in(tiktoken_model_text(*ranks));
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    ASSERT_NE(space, std::string::npos) << line;
    std::string bytes;
    ASSERT_TRUE(absl::Base64Unescape(line.substr(0, space), &bytes)) << line;
    ASSERT_LT(n, ranks->size());
    EXPECT_EQ(bytes, (*ranks)[n]);
    EXPECT_EQ(line.substr(space + 1), std::to_string(n));
    ++n;
  }
  EXPECT_EQ(n, ranks->size());
}

TEST(Corpus, IsMultilingualUtf8OfTheRightSize) {
  const std::string_view corpus = embedded_corpus();
  EXPECT_GE(corpus.size(), 40u * 1024);
  EXPECT_LE(corpus.size(), 60u * 1024);
  EXPECT_TRUE(tokenizer::is_valid_utf8(corpus));
  EXPECT_EQ(embedded_corpus().data(), corpus.data()) << "built once";
  for (const char* needle : {"\r\n",
                             "\t",
                             "don't",
                             "WE'RE",
                             "Straße",
                             "été",
                             "¿",
                             "Поезд",
                             "Ελληνικά",
                             "菜园",
                             "茶館",
                             "ひらがな",
                             "カタカナ",
                             "김치",
                             "المكتبة",
                             "הגינה",
                             "बारिश",
                             "ตลาดน้ำ",
                             "👨‍👩‍👧‍👦",
                             "🇩🇪",
                             "1️⃣",
                             "#include <vector>",
                             "def add(self",
                             "\"readings\": [",
                             "https://",
                             "18446744073709551616"}) {
    EXPECT_NE(corpus.find(needle), std::string_view::npos) << needle;
  }
}

}  // namespace
}  // namespace k3::tools
