// Sampling defaults and the resolved parameters sent to engined: a field the
// client left unset takes the model's generation_config.json value (as vLLM
// does), else OpenAI's default. Keys read from generation_config.json:
// temperature, top_p, top_k, min_p, repetition_penalty, presence_penalty,
// frequency_penalty, and do_sample: false makes the default greedy
// (temperature 0) whatever temperature the file gives, as in transformers.
// Its other keys (eos ids, lengths) are not sampling and are not read here.
#pragma once

#include <string>

#include "gateway/core/api_types.h"
#include "k3serve/v1/engine.pb.h"
#include "shared/status.h"

namespace k3::gateway {

struct SamplingDefaults {
  float temperature = 1.0f;  // OpenAI's
  float top_p = 1.0f;
  int64_t top_k = 0;
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
};

// The defaults from the text of a generation_config.json (`what` names it in
// errors); a value of the wrong type or outside the API's range is refused,
// naming the key.
StatusOr<SamplingDefaults> parse_generation_config(std::string_view text, std::string_view what);
// DIR/generation_config.json; OpenAI's defaults when the file does not exist.
StatusOr<SamplingDefaults> load_generation_config(const std::string& model_dir);

// The engine's parameters: the client's fields over the defaults. The seed
// is left 0 (the generator sets it). top_k -1 becomes 0.
k3serve::v1::SamplingParams resolve_sampling(const SamplingOptions& client,
                                             const SamplingDefaults& defaults);

}  // namespace k3::gateway
