// An engine loop over the tiny model, in process, for the serving tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engined/serving/engine_loop.h"
#include "tests/test_util.h"

namespace k3::testing {

// `sessions` decode slots, 16-token prefill chunks (the chunk policy off
// unless `chunk_policy`); turn checkpoints of
// `checkpoint_bytes` (0: none), in RAM, or only on disk under `dir` when
// given; a prefill snapshot every `snapshot_tokens` (0: none).
inline std::unique_ptr<engined::EngineLoop> make_loop(int sessions, uint64_t checkpoint_bytes = 0,
                                                      const std::string& dir = "",
                                                      int64_t snapshot_tokens = 0,
                                                      bool chunk_policy = false) {
  engined::EngineOptions o;
  o.chunk = 16;
  auto model = engined::Model::load(tiny_model_dir(), {}, o);
  EXPECT_TRUE(model.ok()) << model.status();
  engined::EngineLoopOptions lo;
  lo.sessions = sessions;
  lo.checkpoints.budget_bytes = dir.empty() ? checkpoint_bytes : 0;
  lo.checkpoints.dir = dir;
  lo.checkpoints.disk_budget_bytes = dir.empty() ? 0 : checkpoint_bytes;
  lo.snapshot_tokens = snapshot_tokens;
  lo.chunk_policy = chunk_policy;
  auto loop = engined::EngineLoop::create(std::move(*model), lo);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return std::move(*loop);
}

// A request's tokens and its last event (kFinished or kFailed).
struct LoopReply {
  std::vector<int32_t> tokens;
  engined::ServeEvent end;
};

// Submits `r` and reads its events to the end (60 s at most per event).
inline LoopReply run_to_end(engined::EngineLoop& loop, engined::ServeRequest r) {
  auto h = loop.submit(std::move(r));
  EXPECT_TRUE(h.ok()) << h.status();
  LoopReply out;
  if (!h.ok()) return out;
  engined::ServeEvent e;
  while ((*h)->next(&e, 60000)) {
    if (e.kind == engined::ServeEvent::Kind::kToken) out.tokens.push_back(e.token);
    if (e.kind == engined::ServeEvent::Kind::kFinished ||
        e.kind == engined::ServeEvent::Kind::kFailed) {
      out.end = e;
      return out;
    }
  }
  ADD_FAILURE() << "no event within 60 s";
  return out;
}

}  // namespace k3::testing
