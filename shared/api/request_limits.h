// The limits of a generation request that the gateway (its front door) and
// engined (its own API, its score/generate jobs) both enforce, in one place:
// how many choices and log-probabilities a request may ask for, and the range
// of every sampling field of the wire SamplingParams (engine.proto). The
// ranges are the OpenAI API's, which the gateway has always applied: engined
// refuses what the front door refuses (a temperature above 2, say) with the
// same message, naming the field as the API names it.
//
// Thread-safe (pure).
#pragma once

#include <cstdint>

#include "k3serve/v1/engine.pb.h"
#include "shared/status.h"

namespace k3::api {

inline constexpr int kMaxChoices = 8;       // `n`
inline constexpr int kMaxTopLogprobs = 20;  // `top_logprobs` (chat), `logprobs` (completions)

// Refuses a value outside its range, naming the field (INVALID_ARGUMENT):
// temperature in [0, 2]; top_p in (0, 1]; top_k -1 (no limit), 0 (no limit)
// or more; min_p in [0, 1]; presence and frequency penalties in [-2, 2];
// repetition_penalty in (0, 10]; logit_bias ids in [0, vocab) (vocab <= 0:
// not bounded above, where the vocabulary is not known yet) with biases in
// [-100, 100], not -100 on every id of a known vocabulary (nothing could be
// sampled); NaN nowhere. The proto's unset 0 of top_p and
// repetition_penalty is a value here: callers map "unset" first.
Status validate_sampling(const k3serve::v1::SamplingParams& p, int64_t vocab);

}  // namespace k3::api
