#include "shared/tokenizer/vocab.h"

#include <limits>

namespace k3::tokenizer {
namespace {

std::string hex_byte(unsigned char b) {
  static constexpr char kHex[] = "0123456789abcdef";
  return {'0', 'x', kHex[b >> 4], kHex[b & 15]};
}

}  // namespace

StatusOr<RankTable> RankTable::create(const std::vector<std::string>& tokens) {
  if (tokens.size() >= static_cast<size_t>(std::numeric_limits<TokenId>::max())) {
    return absl::InvalidArgumentError(cat("too many ranks: ", tokens.size()));
  }
  RankTable t;
  size_t total = 0;
  for (const std::string& token : tokens) total += token.size();
  if (total >= std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError("token bytes exceed 4 GiB");
  }
  t.arena_.reserve(total);
  t.offsets_.reserve(tokens.size() + 1);
  t.offsets_.push_back(0);
  for (const std::string& token : tokens) {
    t.arena_ += token;
    t.offsets_.push_back(static_cast<uint32_t>(t.arena_.size()));
  }
  t.short_ranks_.assign(256 + 65536, kNoToken);
  size_t capacity = 16;
  while (capacity < tokens.size() * 2) capacity *= 2;
  t.slots_.assign(capacity, Slot{});
  t.mask_ = capacity - 1;
  for (size_t r = 0; r < tokens.size(); ++r) {
    const std::string& token = tokens[r];
    const TokenId rank = static_cast<TokenId>(r);
    if (token.empty()) return absl::InvalidArgumentError(cat("rank ", r, " has no bytes"));
    const TokenId other = t.find(token);
    if (other != kNoToken) {
      return absl::InvalidArgumentError(
          cat("ranks ", other, " and ", r, " have the same bytes (ranks must be distinct)"));
    }
    const auto* p = reinterpret_cast<const unsigned char*>(token.data());
    if (token.size() <= 2) {
      t.short_ranks_[token.size() == 1 ? p[0] : 256 + (size_t{p[0]} << 8 | p[1])] = rank;
      continue;
    }
    const uint64_t word = head_word(token.data(), token.size());
    const uint64_t h = hash_of(token.data(), token.size(), word);
    size_t i = h & t.mask_;
    while (t.slots_[i].rank != kNoToken) i = (i + 1) & t.mask_;
    t.slots_[i] = Slot{word, rank, check_of(h, token.size())};
  }
  for (int b = 0; b < 256; ++b) {
    if (t.short_ranks_[b] == kNoToken) {
      return absl::InvalidArgumentError(cat("the vocabulary lacks the single byte ",
                                            hex_byte(static_cast<unsigned char>(b)),
                                            " (byte-level BPE needs all 256)"));
    }
  }
  return t;
}

}  // namespace k3::tokenizer
