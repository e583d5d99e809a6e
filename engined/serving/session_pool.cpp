#include "engined/serving/session_pool.h"

#include <algorithm>

namespace k3::engined {

int64_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int64_t>(i);
}

SessionPool::SessionPool(const Model& model, int sessions) : model_(model) {
  sessions_.resize(static_cast<size_t>(std::max(1, sessions)));
  for (auto& s : sessions_) s.state = model_.new_sequence();
}

int SessionPool::busy() const {
  return static_cast<int>(
      std::count_if(sessions_.begin(), sessions_.end(), [](const Session& s) { return s.busy; }));
}

void SessionPool::reset(Session& s) {
  s.state = model_.new_sequence();
  s.tokens.clear();
  s.logits.clear();
}

StatusOr<SessionPlan> SessionPool::acquire(const std::vector<int32_t>& prompt, int hint,
                                           CheckpointStore* checkpoints, float expert_top_p) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  int best = -1, lru = -1;
  int64_t best_reuse = -1;
  for (int i = 0; i < size(); ++i) {
    Session& s = sessions_[static_cast<size_t>(i)];
    if (s.busy) continue;
    if (lru < 0 || s.last_used < sessions_[static_cast<size_t>(lru)].last_used) lru = i;
    const int64_t have = static_cast<int64_t>(s.tokens.size());
    // Usable only when everything the state holds is a prefix of the prompt;
    // the whole prompt already processed needs its last logits.
    int64_t reuse = 0;
    if (s.state->valid && s.expert_top_p == expert_top_p && have <= n &&
        common_prefix(s.tokens, prompt) == have && (have < n || !s.logits.empty()))
      reuse = have;
    if (reuse > best_reuse || (reuse == best_reuse && i == hint)) {
      best = i;
      best_reuse = reuse;
    }
  }
  if (best < 0)
    return absl::ResourceExhaustedError(cat("all ", size(), " engine sessions are busy"));

  SessionPlan plan;
  RestoredState restored;
  if (checkpoints != nullptr && checkpoints->enabled())
    restored = checkpoints->restore_deepest(prompt, best_reuse, expert_top_p);
  if (restored.tokens > best_reuse) {
    // Restore into the least recently used free session (the best-reuse one
    // keeps its state for a conversation that may still extend it, unless it
    // is the only free one).
    plan.session = lru;
    Session& s = sessions_[static_cast<size_t>(lru)];
    evictions_ += !s.tokens.empty();
    s.state = std::move(restored.state);
    s.logits = std::move(restored.logits);
    s.tokens.assign(prompt.begin(), prompt.begin() + restored.tokens);
    plan.restored = restored.tokens;
  } else if (best_reuse > 0) {
    plan.session = best;
    plan.reused = best_reuse;
  } else {
    plan.session = lru;
    evictions_ += !sessions_[static_cast<size_t>(lru)].tokens.empty();
    reset(sessions_[static_cast<size_t>(lru)]);
  }
  Session& s = sessions_[static_cast<size_t>(plan.session)];
  s.expert_top_p = expert_top_p;
  s.busy = true;
  s.last_used = ++clock_;
  return plan;
}

StatusOr<int> SessionPool::acquire_blank() {
  int lru = -1;
  for (int i = 0; i < size(); ++i) {
    const Session& s = sessions_[static_cast<size_t>(i)];
    if (!s.busy && (lru < 0 || s.last_used < sessions_[static_cast<size_t>(lru)].last_used))
      lru = i;
  }
  if (lru < 0)
    return absl::ResourceExhaustedError(cat("all ", size(), " engine sessions are busy"));
  Session& s = sessions_[static_cast<size_t>(lru)];
  evictions_ += !s.tokens.empty();
  reset(s);
  s.busy = true;
  s.last_used = ++clock_;
  return lru;
}

void SessionPool::fork(int from, int to) {
  const Session& a = sessions_[static_cast<size_t>(from)];
  Session& b = sessions_[static_cast<size_t>(to)];
  b.state = std::make_unique<SequenceState>(*a.state);
  b.tokens = a.tokens;
  b.logits = a.logits;
  b.expert_top_p = a.expert_top_p;
}

void SessionPool::release(int i, bool keep) {
  Session& s = sessions_[static_cast<size_t>(i)];
  s.busy = false;
  s.last_used = ++clock_;
  if (!keep || !s.state->valid) reset(s);
}

}  // namespace k3::engined
