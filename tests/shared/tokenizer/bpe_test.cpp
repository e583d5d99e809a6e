// shared/tokenizer/bpe.cpp: rank-BPE. The scan and heap merges agree, and
// tie-breaking on a hand-made vocabulary.
#include "shared/tokenizer/bpe.h"

#include <random>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "shared/tokenizer/tokenizer.h"
#include "shared/tokenizer/tokenizer_files.h"
#include "tests/shared/tokenizer/tokenizer_test_util.h"

namespace k3::tokenizer {
namespace {

using k3::testing::read_file;
using testing::data_path;

TEST(TokenizerEncode, ScanAndHeapMergesAgree) {
  const nlohmann::json corpus = nlohmann::json::parse(read_file(data_path("corpus.json")));
  std::mt19937 rng(7);
  std::vector<TokenId> a, b;
  // Pieces of every length up to 600 bytes cut from the corpus, and random bytes.
  std::string all;
  for (const auto& s : corpus) all += s.get<std::string>();
  std::vector<std::string> pieces;
  for (int i = 0; i < 3000; ++i) {
    const size_t len = 1 + rng() % 600;
    pieces.push_back(all.substr(rng() % (all.size() - len), len));
  }
  for (int i = 0; i < 300; ++i) {
    std::string p(1 + rng() % 200, ' ');
    for (char& c : p) c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : "ab  th"[rng() % 6]);
    pieces.push_back(p);
  }
  pieces.push_back(std::string(5000, 'a'));
  const RankTable ranks =
      *RankTable::create(*parse_tiktoken_model(read_file(data_path("tiny/tiktoken.model"))));
  for (const std::string& p : pieces) {
    a.clear();
    b.clear();
    byte_pair_encode_scan(ranks, p, &a);
    byte_pair_encode_heap(ranks, p, &b);
    ASSERT_EQ(a, b) << "piece of " << p.size() << " bytes";
    std::string joined;
    for (TokenId id : a) joined += ranks.bytes(id);
    ASSERT_EQ(joined, p);
  }
}

// Tie-breaking and the "whole piece is a rank" rule on a hand-made vocabulary.
TEST(TokenizerEncode, RankBpeByHand) {
  std::vector<std::string> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
  ranks.push_back("bc");    // 256
  ranks.push_back("aa");    // 257
  ranks.push_back("ab");    // 258
  ranks.push_back("aaa");   // 259
  ranks.push_back("cd");    // 260
  ranks.push_back("abcd");  // 261: unreachable by merges (bc goes first: a|bc|d)
  const RankTable table = *RankTable::create(ranks);
  auto bpe = [&](std::string_view p) {
    std::vector<TokenId> out;
    byte_pair_encode(table, p, &out);
    return out;
  };
  // "aaa": pairs aa(0) and aa(1) tie at rank 257: the leftmost merges first,
  // then aa+a = aaa (259).
  EXPECT_EQ(bpe("aaa"), (std::vector<TokenId>{259}));
  EXPECT_EQ(bpe("aaaa"), (std::vector<TokenId>{257, 257}));  // aa|aa: aaa+a never forms
  EXPECT_EQ(bpe("aab"), (std::vector<TokenId>{257, 'b'}));   // aa (257) before ab (258)
  EXPECT_EQ(bpe("abcd"), (std::vector<TokenId>{'a', 256, 'd'}));
  TokenizerSpec spec;
  spec.ranks = ranks;
  spec.vocab_size = 262;
  const Tokenizer tok = *Tokenizer::create(spec);
  EXPECT_EQ(*tok.encode("abcd"), (std::vector<TokenId>{261}));  // the whole piece is a rank
  EXPECT_EQ(*tok.encode("abcda"), (std::vector<TokenId>{'a', 256, 'd', 'a'}));
}

}  // namespace
}  // namespace k3::tokenizer
