#include "shared/tokenizer/bpe.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>

namespace k3::tokenizer {
namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

thread_local uint64_t t_steps = 0;  // bpe_steps_on_this_thread()

inline uint32_t rank_of(const RankTable& ranks, std::string_view piece, size_t begin, size_t end) {
  const TokenId r = ranks.find(piece.substr(begin, end - begin));
  return r == kNoToken ? kNoRank : static_cast<uint32_t>(r);
}

}  // namespace

void byte_pair_encode_scan(const RankTable& ranks, std::string_view piece,
                           std::vector<TokenId>* out) {
  const size_t n = piece.size();
  if (n == 1) {
    out->push_back(ranks.find(piece));
    ++t_steps;
    return;
  }
  // Lookups: n-1 pairs, 2 per merge, n at most at the end; plus the parts
  // scanned after each merge.
  uint64_t steps = 2 * n;
  // tiktoken's _byte_pair_merge: parts[i] = (start of part i, rank of part i
  // joined with part i+1); two sentinels at the end.
  struct Part {
    uint32_t start;
    uint32_t rank;
  };
  thread_local std::vector<Part> parts;
  parts.clear();
  uint32_t min_rank = kNoRank;
  size_t min_at = 0;
  for (size_t i = 0; i + 1 < n; ++i) {
    const uint32_t r = rank_of(ranks, piece, i, i + 2);
    if (r < min_rank) {
      min_rank = r;
      min_at = i;
    }
    parts.push_back({static_cast<uint32_t>(i), r});
  }
  parts.push_back({static_cast<uint32_t>(n - 1), kNoRank});
  parts.push_back({static_cast<uint32_t>(n), kNoRank});
  // Rank of parts i, i+1 and i+2 joined (what part i's pair becomes once
  // i+1 is merged into i).
  auto joined_rank = [&](size_t i) {
    return i + 3 < parts.size() ? rank_of(ranks, piece, parts[i].start, parts[i + 3].start)
                                : kNoRank;
  };
  while (min_rank != kNoRank) {
    const size_t i = min_at;
    if (i > 0) parts[i - 1].rank = joined_rank(i - 1);
    parts[i].rank = joined_rank(i);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    steps += 2 + parts.size();
    min_rank = kNoRank;
    for (size_t j = 0; j + 1 < parts.size(); ++j) {
      if (parts[j].rank < min_rank) {
        min_rank = parts[j].rank;
        min_at = j;
      }
    }
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    out->push_back(static_cast<TokenId>(rank_of(ranks, piece, parts[i].start, parts[i + 1].start)));
  }
  t_steps += steps;
}

void byte_pair_encode_heap(const RankTable& ranks, std::string_view piece,
                           std::vector<TokenId>* out) {
  const size_t n = piece.size();
  if (n == 1) {
    out->push_back(ranks.find(piece));
    ++t_steps;
    return;
  }
  // Lookups: n-1 pairs and n at most at the end; building the heap: n. The
  // merges' lookups and heap operations are counted as they happen.
  uint64_t steps = 3 * n;
  // Parts are named by their first byte. next[i] is the start of the part
  // after part i (n at the end), prev[i] the start of the one before;
  // pair_rank[i] is the rank of part i joined with its successor (kNoRank when
  // that is not a rank, when i is the last part, or when i was merged away).
  thread_local std::vector<uint32_t> next, prev, pair_rank;
  thread_local std::vector<uint64_t> heap;  // (rank << 32) | start, min-heap
  next.resize(n);
  prev.resize(n);
  pair_rank.resize(n);
  heap.clear();
  for (size_t i = 0; i < n; ++i) {
    next[i] = static_cast<uint32_t>(i + 1);
    prev[i] = static_cast<uint32_t>(i == 0 ? 0 : i - 1);
    pair_rank[i] = i + 1 < n ? rank_of(ranks, piece, i, i + 2) : kNoRank;
    if (pair_rank[i] != kNoRank) heap.push_back((uint64_t{pair_rank[i]} << 32) | i);
  }
  const auto later = std::greater<uint64_t>();
  std::make_heap(heap.begin(), heap.end(), later);
  auto pair_rank_at = [&](uint32_t i) {
    const uint32_t j = next[i];
    return j < n ? rank_of(ranks, piece, i, next[j]) : kNoRank;
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    ++steps;
    const uint64_t top = heap.back();
    heap.pop_back();
    const uint32_t r = static_cast<uint32_t>(top >> 32);
    const uint32_t i = static_cast<uint32_t>(top & 0xFFFFFFFFu);
    // A stale entry: part i was merged away or its pair changed since (a
    // changed pair is longer, so it has another rank).
    if (pair_rank[i] != r) continue;
    // The lowest rank, leftmost on ties (the heap orders by rank, then start):
    // the pair tiktoken's scan picks. Merge part i with its successor j.
    const uint32_t j = next[i];
    next[i] = next[j];
    if (next[j] < n) prev[next[j]] = i;
    steps += 4;  // two lookups, at most two pushes
    pair_rank[j] = kNoRank;
    pair_rank[i] = pair_rank_at(i);
    if (pair_rank[i] != kNoRank) {
      heap.push_back((uint64_t{pair_rank[i]} << 32) | i);
      std::push_heap(heap.begin(), heap.end(), later);
    }
    if (i > 0) {
      const uint32_t p = prev[i];
      pair_rank[p] = pair_rank_at(p);
      if (pair_rank[p] != kNoRank) {
        heap.push_back((uint64_t{pair_rank[p]} << 32) | p);
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
  for (uint32_t i = 0; i < n; i = next[i]) {
    out->push_back(static_cast<TokenId>(rank_of(ranks, piece, i, next[i])));
  }
  t_steps += steps;
}

uint64_t bpe_steps_on_this_thread() {
  return t_steps;
}

void byte_pair_encode(const RankTable& ranks, std::string_view piece, std::vector<TokenId>* out) {
  if (piece.size() <= kBpeHeapThreshold) {
    byte_pair_encode_scan(ranks, piece, out);
  } else {
    byte_pair_encode_heap(ranks, piece, out);
  }
}

}  // namespace k3::tokenizer
