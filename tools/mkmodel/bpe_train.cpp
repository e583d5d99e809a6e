#include "tools/mkmodel/bpe_train.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <unordered_map>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "shared/tokenizer/split_pattern.h"

namespace k3::tools {
namespace {

// An adjacent pair of token ids, left in the high half: ordering keys orders
// pairs by left rank, then right rank.
using PairKey = uint64_t;

PairKey pair_key(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}
uint32_t pair_left(PairKey key) {
  return static_cast<uint32_t>(key >> 32);
}
uint32_t pair_right(PairKey key) {
  return static_cast<uint32_t>(key);
}

// A heap entry: a pair and its count when pushed. Entries go stale as counts
// change; the count map is the truth (see Trainer::run).
struct Candidate {
  uint64_t count;
  PairKey pair;
};

// Lower priority first for std::priority_queue: fewer occurrences, then the
// larger pair key (so equal counts pop the lowest ranks first).
struct CandidateLess {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.count != b.count) return a.count < b.count;
    return a.pair > b.pair;
  }
};

// One distinct piece as its current token ids.
struct Word {
  std::vector<uint32_t> tokens;
  uint64_t count;
};

class Trainer {
 public:
  Trainer(const PieceCounts& pieces, size_t n_ranks) : n_ranks_(n_ranks) {
    ranks_.reserve(n_ranks);
    for (int b = 0; b < 256; ++b) add_rank(std::string(1, static_cast<char>(b)));
    words_.reserve(pieces.size());
    for (const auto& [piece, count] : pieces) {
      if (piece.size() < 2 || count == 0) continue;  // no pairs
      Word word{{}, count};
      word.tokens.reserve(piece.size());
      for (unsigned char c : piece) word.tokens.push_back(c);
      words_.push_back(std::move(word));
    }
    for (uint32_t w = 0; w < words_.size(); ++w) {
      const std::vector<uint32_t>& t = words_[w].tokens;
      for (size_t i = 0; i + 1 < t.size(); ++i)
        add_pair(pair_key(t[i], t[i + 1]), w, words_[w].count);
    }
    for (const auto& [pair, count] : pair_counts_) heap_.push({count, pair});
  }

  void run(BpeTrainStats* stats) {
    while (ranks_.size() < n_ranks_ && !heap_.empty()) {
      const Candidate top = heap_.top();
      heap_.pop();
      const uint64_t count = count_of(top.pair);
      if (count != top.count) {
        // Stale: the count fell since the push (a rise always pushes anew).
        if (count > 0) heap_.push({count, top.pair});
        continue;
      }
      if (count < 2) break;  // the most frequent pair occurs once: nothing to learn
      const std::string merged = ranks_[pair_left(top.pair)] + ranks_[pair_right(top.pair)];
      uint32_t merged_id;
      auto existing = rank_of_.find(merged);
      if (existing != rank_of_.end()) {
        merged_id = existing->second;
        ++stats->remerges;
      } else {
        if (!reachable(merged)) {
          // Dropped from the heap; it comes back only if its count rises.
          ++stats->unreachable;
          continue;
        }
        merged_id = add_rank(merged);
        ++stats->merges;
      }
      stats->last_count = count;
      merge(top.pair, merged_id);
    }
    stats->ranks = ranks_.size();
  }

  std::vector<std::string> take_ranks() { return std::move(ranks_); }

 private:
  uint32_t add_rank(std::string bytes) {
    const auto id = static_cast<uint32_t>(ranks_.size());
    rank_of_.emplace(bytes, id);
    ranks_.push_back(std::move(bytes));
    return id;
  }

  uint64_t count_of(PairKey pair) const {
    auto it = pair_counts_.find(pair);
    return it == pair_counts_.end() ? 0 : it->second;
  }

  void add_pair(PairKey pair, uint32_t word, uint64_t count) {
    pair_counts_[pair] += count;
    pair_words_[pair].push_back(word);
  }

  void remove_pair(PairKey pair, uint64_t count) {
    auto it = pair_counts_.find(pair);
    it->second -= count;  // present: every pair in a word was counted
    if (it->second == 0) pair_counts_.erase(it);
  }

  // Whether rank-BPE over the current ranks brings `bytes` down to two tokens,
  // so that once `bytes` is the newest (highest) rank, encoding it merges those
  // two last and ends in one token. Merges of lower rank than the new token
  // run exactly as before it existed, so earlier ranks stay reachable too.
  bool reachable(const std::string& bytes) const {
    // parts[i] is the start of the i-th token; parts.back() == bytes.size().
    std::vector<size_t> parts(bytes.size() + 1);
    for (size_t i = 0; i <= bytes.size(); ++i) parts[i] = i;
    constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
    while (parts.size() > 3) {
      uint32_t best = kNone;
      size_t best_at = 0;
      for (size_t i = 0; i + 2 < parts.size(); ++i) {
        auto it = rank_of_.find(bytes.substr(parts[i], parts[i + 2] - parts[i]));
        if (it != rank_of_.end() && it->second < best) {
          best = it->second;
          best_at = i;
        }
      }
      if (best == kNone) return false;
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
    }
    return parts.size() == 3;
  }

  // Replaces every occurrence of `pair` (left to right, non-overlapping) by
  // `merged`, keeping pair counts and the heap current.
  void merge(PairKey pair, uint32_t merged) {
    const uint32_t left = pair_left(pair);
    const uint32_t right = pair_right(pair);
    std::vector<uint32_t> words = std::move(pair_words_[pair]);
    pair_words_.erase(pair);
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    std::vector<PairKey> raised;
    for (uint32_t w : words) {
      std::vector<uint32_t>& t = words_[w].tokens;
      const uint64_t count = words_[w].count;
      // Rewrites t in place: out is the rewritten prefix, i reads the rest.
      // Neighbours are read from the rewritten side on the left and the
      // original side on the right, so back-to-back occurrences ("abab")
      // count (merged, merged) and nothing else.
      size_t out = 0;
      for (size_t i = 0; i < t.size();) {
        if (i + 1 < t.size() && t[i] == left && t[i + 1] == right) {
          remove_pair(pair, count);
          if (out > 0) {
            remove_pair(pair_key(t[out - 1], left), count);
            add_pair(pair_key(t[out - 1], merged), w, count);
            raised.push_back(pair_key(t[out - 1], merged));
          }
          if (i + 2 < t.size()) {
            remove_pair(pair_key(right, t[i + 2]), count);
            add_pair(pair_key(merged, t[i + 2]), w, count);
            raised.push_back(pair_key(merged, t[i + 2]));
          }
          t[out++] = merged;
          i += 2;
        } else {
          t[out++] = t[i++];
        }
      }
      t.resize(out);
    }
    // Invariant for the lazy heap: every pair with a count has an entry of at
    // least that count. Falls keep it; rises push.
    std::sort(raised.begin(), raised.end());
    raised.erase(std::unique(raised.begin(), raised.end()), raised.end());
    for (PairKey p : raised) {
      const uint64_t count = count_of(p);
      if (count > 0) heap_.push({count, p});
    }
  }

  size_t n_ranks_;
  std::vector<std::string> ranks_;                                 // rank -> bytes
  std::unordered_map<std::string, uint32_t> rank_of_;              // bytes -> rank
  std::vector<Word> words_;                                        // sorted by piece bytes
  std::unordered_map<PairKey, uint64_t> pair_counts_;              // weighted occurrences
  std::unordered_map<PairKey, std::vector<uint32_t>> pair_words_;  // may hold stale words
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateLess> heap_;
};

}  // namespace

StatusOr<PieceCounts> count_pieces(std::string_view text) {
  if (!tokenizer::is_valid_utf8(text)) {
    return absl::InvalidArgumentError("BPE training text is not valid UTF-8");
  }
  K3_ASSIGN_OR_RETURN(tokenizer::Splitter splitter,
                      tokenizer::Splitter::create(tokenizer::SplitPattern::kKimi));
  std::vector<std::string_view> pieces;
  splitter.split(text, &pieces);
  PieceCounts counts;
  for (std::string_view piece : pieces) {
    auto it = counts.find(piece);
    if (it == counts.end()) {
      counts.emplace(std::string(piece), 1);
    } else {
      ++it->second;
    }
  }
  return counts;
}

StatusOr<std::vector<std::string>> train_bpe_ranks(const PieceCounts& pieces, size_t n_ranks,
                                                   BpeTrainStats* stats) {
  if (n_ranks < 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_ranks must be at least 256 (the single bytes), got ", n_ranks));
  }
  if (n_ranks > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("n_ranks too large: ", n_ranks));
  }
  BpeTrainStats local;
  BpeTrainStats* s = stats != nullptr ? stats : &local;
  *s = BpeTrainStats{};
  s->distinct_pieces = pieces.size();
  Trainer trainer(pieces, n_ranks);
  trainer.run(s);
  return trainer.take_ranks();
}

StatusOr<std::vector<std::string>> train_bpe_ranks_from_text(std::string_view text, size_t n_ranks,
                                                             BpeTrainStats* stats) {
  K3_ASSIGN_OR_RETURN(PieceCounts counts, count_pieces(text));
  return train_bpe_ranks(counts, n_ranks, stats);
}

std::string tiktoken_model_text(const std::vector<std::string>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    absl::StrAppend(&out, absl::Base64Escape(ranks[i]), " ", i, "\n");
  }
  return out;
}

}  // namespace k3::tools
