// shared/tokenizer/vocab.cpp: the rank table's validation.
#include "shared/tokenizer/vocab.h"

#include "gtest/gtest.h"
#include "shared/tokenizer/tokenizer_files.h"
#include "tests/shared/tokenizer/tokenizer_test_util.h"

namespace k3::tokenizer {
namespace {

using testing::all_bytes_model;
using testing::error_of;

TEST(TokenizerFiles, RankTableRefusesDuplicatesAndMissingBytes) {
  std::vector<std::string> ranks = *parse_tiktoken_model(all_bytes_model());
  ranks.push_back("ab");
  ranks.push_back("ab");
  EXPECT_CONTAINS(error_of(RankTable::create(ranks).status()),
                  "ranks 256 and 257 have the same bytes");
  ranks.resize(255);  // byte 0xff missing
  EXPECT_CONTAINS(error_of(RankTable::create(ranks).status()), "lacks the single byte 0xff");
}

}  // namespace
}  // namespace k3::tokenizer
