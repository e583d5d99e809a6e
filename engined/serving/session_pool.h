// engined's sessions (decode slots): each holds a sequence state and exactly
// the tokens it has processed, so that a request whose prompt extends them
// continues from there (a chat's next turn prefills only the new tokens).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engined/model/model.h"
#include "engined/serving/checkpoint_store.h"

namespace k3::engined {

struct Session {
  std::unique_ptr<SequenceState> state;
  std::vector<int32_t> tokens;  // processed: the state covers exactly these
  std::vector<float> logits;    // [vocab] of the last processed token (empty if none)
  float expert_top_p = 1.0f;    // the expert top-p the state was computed under
  bool busy = false;
  uint64_t last_used = 0;
};

// How a prompt starts: from which session and how many of its tokens are
// already covered.
struct SessionPlan {
  int session = -1;
  int64_t reused = 0;    // tokens continued from the session's state
  int64_t restored = 0;  // tokens restored from a checkpoint
};

// Not thread-safe: engined's engine loop owns it.
class SessionPool {
 public:
  SessionPool(const Model& model, int sessions);

  int size() const { return static_cast<int>(sessions_.size()); }
  int busy() const;
  Session& at(int i) { return sessions_[static_cast<size_t>(i)]; }

  // Picks a free session for `prompt` and makes its state cover a prefix of
  // it: the free session whose processed tokens are the longest prefix of the
  // prompt (preferring `hint` on a tie), or, when a checkpoint goes deeper,
  // the least recently used free session with that checkpoint restored, or the
  // least recently used free session reset. Marks it busy. RESOURCE_EXHAUSTED
  // when every session is busy.
  // Only a state computed under the same `expert_top_p` is reused or
  // restored.
  StatusOr<SessionPlan> acquire(const std::vector<int32_t>& prompt, int hint,
                                CheckpointStore* checkpoints, float expert_top_p = 1.0f);
  // The least recently used free session, reset and marked busy (a choice's
  // session before the fork); RESOURCE_EXHAUSTED when none is free.
  StatusOr<int> acquire_blank();
  // Makes session `to` a copy of session `from`: its state, processed tokens
  // and last logits (n > 1: one prefill, one session per choice).
  void fork(int from, int to);
  int free_count() const { return size() - busy(); }
  // Ends a request: the session is free again. `keep` false (a failed or
  // cut-off pass) resets it to empty.
  void release(int i, bool keep);
  // Sessions whose kept tokens were dropped for another conversation (the
  // least recently used free one is taken when no session extends a prompt).
  uint64_t evictions() const { return evictions_; }

 private:
  void reset(Session& s);
  const Model& model_;
  std::vector<Session> sessions_;
  uint64_t clock_ = 0;
  uint64_t evictions_ = 0;
};

// Length of the common prefix of a and b.
int64_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

}  // namespace k3::engined
