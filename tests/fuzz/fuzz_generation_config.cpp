// libFuzzer target: a model's generation_config.json, as the gateway reads
// it for its sampling defaults (gateway/core/sampling_defaults.h). Whatever is
// accepted must be inside the API's ranges (the defaults go to engined as
// they are); a refusal names the file.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/core/sampling_defaults.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto d = k3::gateway::parse_generation_config(
      std::string_view(reinterpret_cast<const char*>(data), size), "generation_config.json");
  if (!d.ok()) {
    if (d.status().message().find("generation_config.json") == std::string_view::npos)
      __builtin_trap();
    return 0;
  }
  const auto in = [](float v, float lo, float hi) {
    return std::isfinite(v) && v >= lo && v <= hi;
  };
  if (!in(d->temperature, 0, 2) || !in(d->top_p, 0, 1) || !in(d->min_p, 0, 1) ||
      !in(d->presence_penalty, -2, 2) || !in(d->frequency_penalty, -2, 2) ||
      !in(d->repetition_penalty, 0, 10) || d->top_k < 0)
    __builtin_trap();
  // The resolved parameters of a request that sets nothing are the defaults.
  const k3serve::v1::SamplingParams p = k3::gateway::resolve_sampling({}, *d);
  if (!std::isfinite(p.temperature()) || !std::isfinite(p.top_p())) __builtin_trap();
  return 0;
}
