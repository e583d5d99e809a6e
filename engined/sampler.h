// Next-token sampling over the model's logits, with the logit processors of
// the OpenAI API (and vLLM's extensions), applied in this order:
//   1. logit_bias: -100 bans the token (-inf), other values are added;
//   2. presence_penalty / frequency_penalty over the tokens generated so far
//      (logit -= presence * [count > 0] + frequency * count, OpenAI's formula),
//      and repetition_penalty over prompt and generated tokens, control tokens
//      excluded (logit > 0: divided by it; else multiplied: CTRL's form);
//   3. an optional mask (constrained decoding), -inf where not allowed;
//   4. temperature (0: greedy, the argmax of the processed logits, ties to the
//      lower id);
//   5. top_k, then top_p (the smallest set whose probability reaches top_p),
//      then min_p (drop tokens below min_p x the top token's probability).
// Log-probabilities reported to clients are the model's log-softmax before
// any processor (as vLLM does by default): token_logprobs().
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "k3serve/v1/engine.pb.h"
#include "shared/status.h"

namespace k3::engined {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax, ties to the lower id)
  float top_p = 1.0f;        // nucleus: smallest set with cumulative probability >= top_p
  int64_t top_k = 0;         // 0 = no limit
  uint64_t seed = 0;
  float min_p = 0.0f;  // 0 = off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;  // 1 = off
  std::map<int32_t, float> logit_bias;
};

// The parameters as engine.proto carries them, for the checks every
// request gets (shared/api/request_limits.h's validate_sampling: the
// gateway's ranges, so engined refuses what the front door refuses).
k3serve::v1::SamplingParams to_wire(const SamplingParams& p);

// The model's log-probabilities at one position (before any processor).
struct TokenLogprobs {
  float chosen = 0;                            // of the sampled token
  std::vector<std::pair<int32_t, float>> top;  // the `top_n` most likely, best first
};
TokenLogprobs token_logprobs(const float* logits, int64_t vocab, int32_t chosen, int top_n);

// Not thread-safe (owns its random generator and the token history); copy to
// fork a sequence (n > 1 choices), reseeding the copy.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  // The prompt (for repetition_penalty) and the ids never penalized (control
  // tokens). Call before the first sample().
  void set_context(const std::vector<int32_t>& prompt, std::unordered_set<int32_t> exempt);
  void reseed(uint64_t seed) { rng_.seed(seed); }
  // Samples the next token and records it as generated. `mask`, when given,
  // holds vocab flags: 0 = not allowed.
  int32_t sample(const float* logits, int64_t vocab, const uint8_t* mask = nullptr);
  // The logits after steps 1-3 (for tests and logprob-free callers).
  void process(const float* logits, int64_t vocab, const uint8_t* mask,
               std::vector<float>* out) const;
  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int64_t> generated_;  // id -> count
  std::unordered_set<int32_t> seen_;                // prompt + generated, for repetition_penalty
  std::unordered_set<int32_t> exempt_;
  std::vector<float> work_;
  std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace k3::engined
