#include "shared/grammar/token_constraint.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <functional>

namespace k3::grammar {
namespace {

// The cache is emptied when it would exceed either bound.
constexpr size_t kMaxCacheEntries = 4096;
constexpr size_t kMaxCacheBytes = size_t{256} << 20;
// The far groups of an entry take at most this many bytes (beyond: a
// bounded mask is computed afresh; a regex string's state may allow most of
// the vocabulary at many distances).
constexpr size_t kMaxFarBytes = size_t{1} << 20;

void set_bit(std::vector<uint64_t>* bits, int32_t id) {
  (*bits)[static_cast<size_t>(id) / 64] |= uint64_t{1} << (static_cast<uint32_t>(id) % 64);
}
void clear_bit(std::vector<uint64_t>* bits, int32_t id) {
  (*bits)[static_cast<size_t>(id) / 64] &= ~(uint64_t{1} << (static_cast<uint32_t>(id) % 64));
}

// Byte b -> eight bytes, byte j being bit j of b (0 or 1).
constexpr std::array<uint64_t, 256> spread_table() {
  std::array<uint64_t, 256> t{};
  for (uint64_t b = 0; b < 256; ++b)
    for (uint64_t j = 0; j < 8; ++j) t[b] |= ((b >> j) & 1) << (8 * j);
  return t;
}
constexpr std::array<uint64_t, 256> kSpread = spread_table();

// mask[id] = bit id of `bits`, for ids < mask.size().
void expand(const std::vector<uint64_t>& bits, std::vector<uint8_t>* mask) {
  uint8_t* out = mask->data();
  const size_t n = mask->size();
  for (size_t w = 0; w < bits.size() && w * 64 < n; ++w) {
    const uint64_t x = bits[w];
    uint8_t* o = out + w * 64;
    const size_t room = std::min<size_t>(64, n - w * 64);
    if (room == 64) {
      if (x == 0) {
        std::memset(o, 0, 64);
        continue;
      }
      if constexpr (std::endian::native == std::endian::little) {
        for (size_t k = 0; k < 8; ++k) {
          const uint64_t v = kSpread[(x >> (8 * k)) & 0xFF];
          std::memcpy(o + 8 * k, &v, 8);
        }
        continue;
      }
    }
    for (size_t j = 0; j < room; ++j) o[j] = static_cast<uint8_t>((x >> j) & 1);
  }
}

}  // namespace

struct Constraint::Walk {
  int64_t bound = 0;
  Entry* out = nullptr;
  std::vector<std::pair<int64_t, int32_t>>* dists = nullptr;  // null: not kept
  std::vector<State>* levels = nullptr;
};

std::shared_ptr<const Constraint> Constraint::create(std::shared_ptr<const Grammar> grammar,
                                                     std::shared_ptr<const VocabIndex> vocab) {
  return std::shared_ptr<const Constraint>(new Constraint(std::move(grammar), std::move(vocab)));
}

const TokenClass* Constraint::inner_class(const State& s, int64_t* limit,
                                          const TokenClass** patterned) const {
  *patterned = nullptr;
  if (s.stacks.size() != 1 || s.stacks[0].empty()) return nullptr;
  const Frame& f = s.stacks[0].back();
  const Node& n = matcher_.grammar().nodes[static_cast<size_t>(f.node)];
  const bool at_rest = f.esc == 0 && f.need == 0;
  *limit = kInfinite;
  switch (n.kind) {
    case NodeKind::kString: {
      if (f.phase != 1 || !at_rest) return nullptr;
      const TokenClass* c = n.raw ? &vocab_->text_inner() : &vocab_->string_inner();
      if (n.regex >= 0) {
        *patterned = c;
        return nullptr;
      }
      *limit = n.max_count - f.count;
      return c;
    }
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

// The tokens ending at trie node `child`, `d` tokens from completion: into
// the walk's mask (and its distance list).
template <typename W>
void accept_tokens(const VocabTrie& trie, const VocabTrie::TrieNode& child, int64_t d, W* w) {
  auto* out = w->out;
  for (uint32_t t = child.tokens_begin; t < child.tokens_end; ++t) {
    set_bit(&out->bits, trie.tokens[t]);
    if (w->dists != nullptr) w->dists->emplace_back(d, trie.tokens[t]);
  }
  out->allowed += child.tokens_end - child.tokens_begin;
  out->max_after = std::max(out->max_after, d);
  out->min_after = std::min(out->min_after, d);
}

void Constraint::walk(const VocabTrie& trie, uint32_t node, size_t depth, Walk* w) const {
  const auto& nodes = trie.nodes;
  const VocabTrie::TrieNode& n = nodes[node];
  const State& s = (*w->levels)[depth];
  for (uint32_t c = n.first_child; c < n.first_child + n.num_children; ++c) {
    State& next = (*w->levels)[depth + 1];
    if (!matcher_.feed(s, nodes[c].byte, &next)) continue;
    const VocabTrie::TrieNode& child = nodes[c];
    if (child.tokens_end > child.tokens_begin) {
      const int64_t d = matcher_.distance(next);
      if (d <= w->bound) {
        accept_tokens(trie, child, d, w);
      }
    }
    // `next` lives in levels[depth + 1]; the recursion writes deeper levels only.
    if (child.num_children > 0) walk(trie, c, depth + 1, w);
  }
}

void Constraint::walk_frame(const VocabTrie& trie, uint32_t node, const Frame& f, int64_t base,
                            Walk* w) const {
  const auto& nodes = trie.nodes;
  const VocabTrie::TrieNode& n = nodes[node];
  for (uint32_t c = n.first_child; c < n.first_child + n.num_children; ++c) {
    Frame next = f;
    if (!matcher_.step_inside(&next, nodes[c].byte)) continue;
    const VocabTrie::TrieNode& child = nodes[c];
    if (child.tokens_end > child.tokens_begin) {
      const int64_t d = sat_add(base, matcher_.frame_distance(next));
      if (d <= w->bound) {
        accept_tokens(trie, child, d, w);
      }
    }
    if (child.num_children > 0) walk_frame(trie, c, next, base, w);
  }
}

Constraint::Entry Constraint::compute(const State& state, int64_t bound, bool far) const {
  // Sequences on top entered: the same symbols to the same states, and the
  // frame that reads next on top.
  const State s = matcher_.entered(state);
  Entry e;
  e.bits.assign(static_cast<size_t>((vocab_->vocab_size() + 63) / 64), 0);
  // Per thread, reused: the walk's states per trie depth (never resized
  // during a walk, which keeps references) and the distances it collects.
  thread_local std::vector<State> levels;
  thread_local std::vector<std::pair<int64_t, int32_t>> dists;
  if (levels.size() < vocab_->max_token_len() + 2) levels.resize(vocab_->max_token_len() + 2);
  dists.clear();
  levels[0] = s;
  const VocabTrie* trie = &vocab_->trie();
  Walk w;
  w.bound = bound;
  w.out = &e;
  w.dists = far ? &dists : nullptr;
  w.levels = &levels;
  int64_t limit = 0;
  const TokenClass* patterned = nullptr;
  if (const TokenClass* inner = inner_class(s, &limit, &patterned)) {
    // Inner tokens keep the frame going and only add code points: in a
    // string they shorten the completion only while below minLength, in a
    // key they make it another key (pos -1). Groups by code points.
    const Frame& top = s.stacks[0].back();
    const Node& n = matcher_.grammar().nodes[static_cast<size_t>(top.node)];
    const int64_t most = std::min<int64_t>(limit, inner->max_code_points());
    std::vector<InnerGroup> groups;
    if (n.kind == NodeKind::kObject) {
      State other = s;
      other.stacks[0].back().pos = -1;
      groups.push_back(
          {matcher_.distance(other), 1, static_cast<uint32_t>(std::max<int64_t>(most, 0)), 0});
    } else {
      const int64_t needed =
          n.kind == NodeKind::kString ? std::max<int64_t>(1, n.min_count - top.count) : 1;
      State more = s;
      Frame& mf = more.stacks[0].back();
      for (int64_t k = 1; k <= std::min(needed, most); ++k) {
        mf.count = top.count + k;
        groups.push_back({matcher_.distance(more), static_cast<uint32_t>(k),
                          static_cast<uint32_t>(k == needed ? most : k), 0});
      }
    }
    for (InnerGroup& g : groups) {
      if (g.hi < g.lo) continue;
      g.count = inner->count_between(g.lo, g.hi);
      if (g.count == 0 || g.d > bound) continue;
      const uint64_t* hi = inner->upto(g.hi);
      const uint64_t* lo = inner->upto(g.lo - 1);
      for (size_t i = 0; i < e.bits.size(); ++i) e.bits[i] |= hi[i] & ~lo[i];
      e.allowed += g.count;
      e.max_after = std::max(e.max_after, g.d);
      e.min_after = std::min(e.min_after, g.d);
      if (far) e.inner_groups.push_back(g);
    }
    if (far) e.inner = inner;
    trie = &inner->others;
  } else if (patterned != nullptr) {
    // The pattern reads the class's tokens one code point after another:
    // only the string's frame steps along its trie.
    const Stack& st = s.stacks[0];
    int64_t base = 0;
    for (size_t i = 0; i + 1 < st.size(); ++i) base = sat_add(base, matcher_.frame_distance(st[i]));
    walk_frame(patterned->trie, 0, st.back(), base, &w);
    trie = &patterned->others;
  }
  walk(*trie, 0, 0, &w);
  for (int k = 0; k < 4; ++k) {
    const int32_t id = vocab_->control_id(k);
    if (id < 0 || id >= vocab_->vocab_size()) continue;
    State next;
    if (!matcher_.feed(s, 256 + k, &next)) continue;
    const int64_t d = matcher_.distance(next);
    if (d > bound) continue;
    set_bit(&e.bits, id);
    ++e.allowed;
    e.max_after = std::max(e.max_after, d);
    e.min_after = std::min(e.min_after, d);
    if (far) dists.emplace_back(d, id);
  }
  if (far) {
    std::erase_if(dists, [&](const auto& p) { return p.first <= e.min_after; });
    std::sort(dists.begin(), dists.end(), std::greater<>());
    const size_t words = e.bits.size();
    size_t bytes = 0;
    for (size_t i = 0; i < dists.size();) {
      size_t j = i;
      while (j < dists.size() && dists[j].first == dists[i].first) ++j;
      FarGroup g;
      g.d = dists[i].first;
      g.count = static_cast<int64_t>(j - i);
      if ((j - i) * sizeof(int32_t) < words * sizeof(uint64_t)) {
        for (size_t k = i; k < j; ++k) g.ids.push_back(dists[k].second);
        bytes += g.ids.size() * sizeof(int32_t);
      } else {
        g.bits.assign(words, 0);
        for (size_t k = i; k < j; ++k) set_bit(&g.bits, dists[k].second);
        bytes += words * sizeof(uint64_t);
      }
      e.far.push_back(std::move(g));
      i = j;
    }
    if (bytes > kMaxFarBytes) {
      e.far.clear();
      e.far_overflow = true;
    }
    std::erase_if(e.inner_groups, [&](const InnerGroup& g) { return g.d <= e.min_after; });
    std::sort(e.inner_groups.begin(), e.inner_groups.end(),
              [](const InnerGroup& a, const InnerGroup& b) { return a.d > b.d; });
  }
  return e;
}

std::shared_ptr<const Constraint::Entry> Constraint::entry(const State& s, bool* hit) const {
  thread_local std::string key;
  s.key_into(&key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      if (hit != nullptr) *hit = true;
      return it->second;
    }
  }
  if (hit != nullptr) *hit = false;
  auto e = std::make_shared<const Entry>(compute(s, kInfinite, /*far=*/true));
  size_t bytes = key.size() + e->bits.size() * sizeof(uint64_t);
  for (const FarGroup& g : e->far)
    bytes += g.ids.size() * sizeof(int32_t) + g.bits.size() * sizeof(uint64_t);
  std::lock_guard<std::mutex> lock(mu_);
  if (cache_.size() >= kMaxCacheEntries || cache_bytes_ + bytes > kMaxCacheBytes) {
    cache_.clear();
    cache_bytes_ = 0;
  }
  if (cache_.emplace(key, e).second) cache_bytes_ += bytes;
  return e;
}

size_t Constraint::cache_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

int64_t ConstraintState::mask(int64_t remaining, std::vector<uint8_t>* mask, bool* cached) const {
  mask->resize(static_cast<size_t>(c_->vocab().vocab_size()));
  std::shared_ptr<const Constraint::Entry> e = c_->entry(state_, cached);
  const int64_t bound = remaining - 1;
  // Even the shortest completion does not fit (min_after > bound): go on
  // unbounded (the reply will be cut at the limit) rather than stop with
  // nothing allowed.
  if (e->max_after <= bound || e->min_after > bound) {
    expand(e->bits, mask);
    return e->allowed;
  }
  if (e->far_overflow) {
    const Constraint::Entry bounded = c_->compute(state_, bound);
    expand(bounded.bits, mask);
    return bounded.allowed;
  }
  // The cached mask less the tokens that go too far.
  thread_local std::vector<uint64_t> bits;
  bits = e->bits;
  int64_t allowed = e->allowed;
  for (const Constraint::FarGroup& g : e->far) {
    if (g.d <= bound) break;
    for (int32_t id : g.ids) clear_bit(&bits, id);
    for (size_t i = 0; i < g.bits.size(); ++i) bits[i] &= ~g.bits[i];
    allowed -= g.count;
  }
  for (const Constraint::InnerGroup& g : e->inner_groups) {
    if (g.d <= bound) break;
    const uint64_t* hi = e->inner->upto(g.hi);
    const uint64_t* lo = e->inner->upto(g.lo - 1);
    for (size_t i = 0; i < bits.size(); ++i) bits[i] &= ~(hi[i] & ~lo[i]);
    allowed -= g.count;
  }
  expand(bits, mask);
  return allowed;
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
