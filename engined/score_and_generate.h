// engined's command-line jobs: `score` (teacher-forced logits) and `generate`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "engined/sampler.h"
#include "shared/status.h"

namespace k3::engined {

// "1,2,3" -> ids. Refuses empty items, non-digits, values beyond int32.
StatusOr<std::vector<int32_t>> parse_ids(const std::string& text);

struct ScoreJob {
  std::string model_dir;
  std::vector<std::string> extra_dirs;
  std::string ids;
  std::string out;  // little-endian f32 [T, vocab]
  EngineOptions engine;
  ExpertSourceOptions experts;
};
Status run_score(const ScoreJob& job);

struct GenerateJob {
  std::string model_dir;
  std::vector<std::string> extra_dirs;
  // Exactly one prompt form: token ids, ordinary text, or a chat message
  // rendered in K3's XTML format (as one user turn with the generation prompt).
  std::string ids;
  std::string prompt;
  std::string chat;
  bool thinking = true;  // for `chat`: open the think channel
  int64_t max_tokens = 32;
  SamplingParams sampling;
  std::vector<int64_t> stop_ids;  // besides the model's stop tokens (checkpoint/stop_tokens.h)
  EngineOptions engine;
  ExpertSourceOptions experts;
};
Status run_generate(const GenerateJob& job);

}  // namespace k3::engined
