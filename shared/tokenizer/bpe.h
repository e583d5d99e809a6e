// Rank-BPE (tiktoken's byte_pair_encode): start from single bytes and
// repeatedly merge the adjacent pair whose concatenation has the lowest rank
// (ties: the leftmost pair) until no adjacent concatenation is a rank.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "shared/tokenizer/vocab.h"

namespace k3::tokenizer {

// Pieces up to this many bytes use tiktoken's own loop (a linear scan for the
// lowest rank after each merge: O(n^2), but fastest for short pieces); longer
// ones a linked list with a min-heap (O(n log n)).
inline constexpr size_t kBpeHeapThreshold = 24;

// Appends to *out the ranks of `piece` (non-empty) by rank-BPE. Every single
// byte is a rank (RankTable guarantees it), so this cannot fail. The caller
// checks first whether the whole piece is one rank, as tiktoken does (rank-BPE
// alone may not reach a rank that is in the table).
void byte_pair_encode(const RankTable& ranks, std::string_view piece, std::vector<TokenId>* out);

// Work byte_pair_encode has done on the calling thread so far, in steps: rank
// lookups, plus the parts the scan looks through for the lowest rank, plus the
// heap's pushes and pops. A deterministic measure of encoding cost for tests
// of how it grows with the input (timings are noisy).
uint64_t bpe_steps_on_this_thread();

// The two implementations, exposed so tests can hold them against each other.
void byte_pair_encode_scan(const RankTable& ranks, std::string_view piece,
                           std::vector<TokenId>* out);
void byte_pair_encode_heap(const RankTable& ranks, std::string_view piece,
                           std::vector<TokenId>* out);

}  // namespace k3::tokenizer
