#include "shared/grammar/token_constraint.h"

#include <algorithm>

namespace k3::grammar {
namespace {
constexpr size_t kMaxCacheEntries = 4096;
}

std::shared_ptr<const Constraint> Constraint::create(std::shared_ptr<const Grammar> grammar,
                                                     std::shared_ptr<const VocabIndex> vocab) {
  return std::shared_ptr<const Constraint>(new Constraint(std::move(grammar), std::move(vocab)));
}

const TokenClass* Constraint::inner_class(const State& s, int64_t* limit) const {
  if (s.stacks.size() != 1 || s.stacks[0].empty()) return nullptr;
  const Frame& f = s.stacks[0].back();
  const Node& n = matcher_.grammar().nodes[static_cast<size_t>(f.node)];
  const bool at_rest = f.esc == 0 && f.need == 0;
  *limit = kInfinite;
  switch (n.kind) {
    case NodeKind::kString:
      if (f.phase != 1 || n.regex >= 0 || !at_rest) return nullptr;
      *limit = n.max_count - f.count;
      return n.raw ? &vocab_->text_inner() : &vocab_->string_inner();
    case NodeKind::kFreeText:
      return at_rest ? &vocab_->text_inner() : nullptr;
    case NodeKind::kObject:  // inside a key that can only be another key now
      if (f.phase != 2 || n.additional < 0 || !at_rest) return nullptr;
      if (f.pos >= 0 && !n.keys.nodes[static_cast<size_t>(f.pos)].edges.empty()) return nullptr;
      return &vocab_->string_inner();
    default:
      return nullptr;
  }
}

void Constraint::walk(const VocabTrie& trie, uint32_t node, const State& s, size_t depth,
                      int64_t bound, Entry* out, std::vector<State>* levels) const {
  const auto& nodes = trie.nodes;
  const VocabTrie::TrieNode& n = nodes[node];
  for (uint32_t c = n.first_child; c < n.first_child + n.num_children; ++c) {
    State& next = (*levels)[depth + 1];
    if (!matcher_.feed(s, nodes[c].byte, &next)) continue;
    const VocabTrie::TrieNode& child = nodes[c];
    if (child.tokens_end > child.tokens_begin) {
      const int64_t d = matcher_.distance(next);
      if (d <= bound) {
        for (uint32_t t = child.tokens_begin; t < child.tokens_end; ++t) {
          const auto id = static_cast<size_t>(trie.tokens[t]);
          out->bits[id / 64] |= uint64_t{1} << (id % 64);
          ++out->allowed;
        }
        out->max_after = std::max(out->max_after, d);
      }
    }
    if (child.num_children > 0) {
      // `next` lives in levels[depth + 1]; the recursion writes deeper levels only.
      walk(trie, c, (*levels)[depth + 1], depth + 1, bound, out, levels);
    }
  }
}

Constraint::Entry Constraint::compute(const State& s, int64_t bound) const {
  Entry e;
  e.bits.assign(static_cast<size_t>((vocab_->vocab_size() + 63) / 64), 0);
  std::vector<State> levels(vocab_->max_token_len() + 2);  // never resized: walk keeps references
  const VocabTrie* trie = &vocab_->trie();
  int64_t limit = 0;
  if (const TokenClass* inner = inner_class(s, &limit)) {
    // Inner tokens keep the frame going; in a string they never lengthen
    // the completion, in a key they make it another key (pos -1).
    int64_t d = matcher_.distance(s);
    const Frame& top = s.stacks[0].back();
    if (matcher_.grammar().nodes[static_cast<size_t>(top.node)].kind == NodeKind::kObject) {
      State other = s;
      other.stacks[0].back().pos = -1;
      d = matcher_.distance(other);
    }
    if (d <= bound) {
      for (size_t i = 0; i < inner->ids.size() && inner->code_points[i] <= limit; ++i) {
        const auto id = static_cast<size_t>(inner->ids[i]);
        e.bits[id / 64] |= uint64_t{1} << (id % 64);
        ++e.allowed;
      }
      e.max_after = std::max(e.max_after, d);
      trie = &inner->others;
    }
  }
  walk(*trie, 0, s, 0, bound, &e, &levels);
  for (int k = 0; k < 4; ++k) {
    const int32_t id = vocab_->control_id(k);
    if (id < 0 || id >= vocab_->vocab_size()) continue;
    State next;
    if (!matcher_.feed(s, 256 + k, &next)) continue;
    const int64_t d = matcher_.distance(next);
    if (d > bound) continue;
    e.bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
    ++e.allowed;
    e.max_after = std::max(e.max_after, d);
  }
  return e;
}

std::shared_ptr<const Constraint::Entry> Constraint::entry(const State& s) const {
  const std::string key = s.key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  auto e = std::make_shared<const Entry>(compute(s, kInfinite));
  std::lock_guard<std::mutex> lock(mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(key, e);
  return e;
}

size_t Constraint::cache_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

int64_t ConstraintState::mask(int64_t remaining, std::vector<uint8_t>* mask) const {
  const int64_t vocab = c_->vocab().vocab_size();
  mask->assign(static_cast<size_t>(vocab), 0);
  std::shared_ptr<const Constraint::Entry> cached = c_->entry(state_);
  const int64_t bound = remaining - 1;
  Constraint::Entry bounded;
  const Constraint::Entry* e = cached.get();
  if (cached->max_after > bound) {
    bounded = c_->compute(state_, bound);
    // Even the shortest completion does not fit: go on unbounded (the reply
    // will be cut at the limit) rather than stop with nothing allowed.
    if (bounded.allowed > 0) e = &bounded;
  }
  for (size_t w = 0; w < e->bits.size(); ++w) {
    for (uint64_t b = e->bits[w]; b != 0; b &= b - 1) {
      const size_t id = w * 64 + static_cast<size_t>(__builtin_ctzll(b));
      if (id < mask->size()) (*mask)[id] = 1;
    }
  }
  return e->allowed;
}

Status ConstraintState::accept(int32_t id) {
  const VocabIndex& v = c_->vocab();
  if (id < 0 || id >= v.vocab_size())
    return absl::InvalidArgumentError(cat("token ", id, " is outside the vocabulary"));
  State cur = state_, next;
  const int sym = v.control_symbol(id);
  if (sym >= 0) {
    if (!c_->matcher().feed(cur, sym, &next))
      return absl::InvalidArgumentError(
          cat("the grammar does not allow control token ", id, " here"));
    state_ = std::move(next);
    return absl::OkStatus();
  }
  const std::string& bytes = v.bytes(id);
  if (bytes.empty())
    return absl::InvalidArgumentError(cat("the grammar does not allow special token ", id));
  for (char ch : bytes) {
    if (!c_->matcher().feed(cur, static_cast<unsigned char>(ch), &next))
      return absl::InvalidArgumentError(cat("the grammar does not allow token ", id, " here"));
    std::swap(cur, next);
  }
  state_ = std::move(cur);
  return absl::OkStatus();
}

bool ConstraintState::finished() const {
  return c_->matcher().accepting(state_);
}

}  // namespace k3::grammar
