// Next-token sampling: greedy, temperature, top-k, top-p, seeded.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace k3::engine {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax, ties to the lower id)
  float top_p = 1.0f;        // nucleus: smallest set with cumulative probability >= top_p
  int64_t top_k = 0;         // 0 = no limit
  uint64_t seed = 0;
};

// Not thread-safe (owns its random generator).
class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  int32_t sample(const float* logits, int64_t vocab);

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace k3::engine
