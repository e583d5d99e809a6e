// Byte-level BPE training in tiktoken's form: a list of token byte strings in
// rank order (no merge list). Ranks 0..255 are the single bytes; every later
// rank is the concatenation of the most frequent adjacent pair of tokens over
// the training pieces. Used by mkmodel to give tiny test models a real
// vocabulary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace k3::tools {

// Distinct pre-tokenized pieces and how often each occurs.
using PieceCounts = std::map<std::string, uint64_t, std::less<>>;

// What a training run did; for logs and tests.
struct BpeTrainStats {
  size_t distinct_pieces = 0;
  size_t ranks = 0;         // ranks returned, the 256 bytes included
  size_t merges = 0;        // pairs that became a new rank
  size_t remerges = 0;      // pairs whose concatenation was already a rank
  size_t unreachable = 0;   // pairs refused: rank-BPE could never form them
  uint64_t last_count = 0;  // occurrences of the last pair merged
};

// Splits `text` (valid UTF-8) with Kimi's pattern and counts the pieces.
StatusOr<PieceCounts> count_pieces(std::string_view text);

// Trains ranks from piece counts. Each step takes the adjacent token pair with
// the most occurrences (ties: the lowest left rank, then the lowest right rank),
// stopping at `n_ranks` ranks (>= 256) or when no pair occurs twice.
// Deterministic.
//
// Every returned rank is reachable by tiktoken's rank-BPE: encoding a token's
// own bytes by repeatedly merging the adjacent pair whose concatenation has the
// lowest rank ends in that one token. Training by pair counts alone does not
// guarantee this, so a pair whose bytes rank-BPE would not bring down to two
// tokens is refused. A pair whose concatenation is already a rank is merged
// into it without taking a new rank (tiktoken ranks must be distinct).
StatusOr<std::vector<std::string>> train_bpe_ranks(const PieceCounts& pieces, size_t n_ranks,
                                                   BpeTrainStats* stats = nullptr);

// count_pieces, then train_bpe_ranks.
StatusOr<std::vector<std::string>> train_bpe_ranks_from_text(std::string_view text, size_t n_ranks,
                                                             BpeTrainStats* stats = nullptr);

// tiktoken.model content: one line per rank, `base64(token bytes) rank\n`
// (standard alphabet, padded).
std::string tiktoken_model_text(const std::vector<std::string>& ranks);

}  // namespace k3::tools
