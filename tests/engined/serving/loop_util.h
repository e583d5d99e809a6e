// An engine loop over the tiny model, in process, for the serving tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engined/serving/engine_loop.h"
#include "tests/test_util.h"

namespace k3::testing {

// `sessions` decode slots, 16-token prefill chunks; turn checkpoints of
// `checkpoint_bytes` (0: none), on disk under `dir` when given.
inline std::unique_ptr<engined::EngineLoop> make_loop(int sessions, uint64_t checkpoint_bytes = 0,
                                                      const std::string& dir = "") {
  engined::EngineOptions o;
  o.chunk = 16;
  auto model = engined::Model::load(tiny_model_dir(), {}, o);
  EXPECT_TRUE(model.ok()) << model.status();
  engined::EngineLoopOptions lo;
  lo.sessions = sessions;
  lo.checkpoints.budget_bytes = checkpoint_bytes;
  lo.checkpoints.dir = dir;
  auto loop = engined::EngineLoop::create(std::move(*model), lo);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return std::move(*loop);
}

}  // namespace k3::testing
