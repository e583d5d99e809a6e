#include "gateway/core/sampling_defaults.h"

#include <cmath>
#include <filesystem>

#include "gateway/core/json_text.h"
#include "shared/base/file.h"

namespace k3::gateway {
namespace {

// The number at `key` (absent and null: none).
StatusOr<std::optional<double>> number(const nlohmann::ordered_json& j, const char* key,
                                       std::string_view what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number())
    return absl::InvalidArgumentError(cat(what, ": '", key, "' must be a number"));
  return std::optional<double>(it->get<double>());
}

}  // namespace

StatusOr<SamplingDefaults> parse_generation_config(std::string_view text, std::string_view what) {
  K3_ASSIGN_OR_RETURN(nlohmann::ordered_json j, parse_json_text(text, what));
  if (!j.is_object()) return absl::InvalidArgumentError(cat(what, " must be a JSON object"));
  SamplingOptions o;
  K3_ASSIGN_OR_RETURN(auto temperature, number(j, "temperature", what));
  K3_ASSIGN_OR_RETURN(auto top_p, number(j, "top_p", what));
  K3_ASSIGN_OR_RETURN(auto top_k, number(j, "top_k", what));
  K3_ASSIGN_OR_RETURN(auto min_p, number(j, "min_p", what));
  K3_ASSIGN_OR_RETURN(auto presence, number(j, "presence_penalty", what));
  K3_ASSIGN_OR_RETURN(auto frequency, number(j, "frequency_penalty", what));
  K3_ASSIGN_OR_RETURN(auto repetition, number(j, "repetition_penalty", what));
  if (temperature) o.temperature = static_cast<float>(*temperature);
  if (top_p) o.top_p = static_cast<float>(*top_p);
  if (top_k) {
    // Range first: casting a double past int64's range is undefined.
    if (!(*top_k >= -1 && *top_k <= 1e9) || *top_k != std::floor(*top_k))
      return absl::InvalidArgumentError(
          cat(what, ": 'top_k' must be an integer from -1 (no limit) to 1e9"));
    o.top_k = static_cast<int64_t>(*top_k);
  }
  if (min_p) o.min_p = static_cast<float>(*min_p);
  if (presence) o.presence_penalty = static_cast<float>(*presence);
  if (frequency) o.frequency_penalty = static_cast<float>(*frequency);
  if (repetition) o.repetition_penalty = static_cast<float>(*repetition);
  if (Status s = check_client_sampling(o); !s.ok())
    return Status(s.code(), cat(what, ": ", msg(s)));

  SamplingDefaults d;
  d.temperature = o.temperature.value_or(d.temperature);
  auto do_sample = j.find("do_sample");
  if (do_sample != j.end() && !do_sample->is_null()) {
    if (!do_sample->is_boolean())
      return absl::InvalidArgumentError(cat(what, ": 'do_sample' must be a boolean"));
    if (!do_sample->get<bool>()) d.temperature = 0.0f;
  }
  d.top_p = o.top_p.value_or(d.top_p);
  d.top_k = std::max<int64_t>(0, o.top_k.value_or(d.top_k));
  d.min_p = o.min_p.value_or(d.min_p);
  d.presence_penalty = o.presence_penalty.value_or(d.presence_penalty);
  d.frequency_penalty = o.frequency_penalty.value_or(d.frequency_penalty);
  d.repetition_penalty = o.repetition_penalty.value_or(d.repetition_penalty);
  return d;
}

StatusOr<SamplingDefaults> load_generation_config(const std::string& model_dir) {
  const std::string path = model_dir + "/generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return SamplingDefaults{};
  K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(path, 1u << 20));
  return parse_generation_config(text, path);
}

k3serve::v1::SamplingParams resolve_sampling(const SamplingOptions& c, const SamplingDefaults& d) {
  k3serve::v1::SamplingParams p;
  p.set_temperature(c.temperature.value_or(d.temperature));
  p.set_top_p(c.top_p.value_or(d.top_p));
  p.set_top_k(std::max<int64_t>(0, c.top_k.value_or(d.top_k)));
  p.set_min_p(c.min_p.value_or(d.min_p));
  p.set_presence_penalty(c.presence_penalty.value_or(d.presence_penalty));
  p.set_frequency_penalty(c.frequency_penalty.value_or(d.frequency_penalty));
  p.set_repetition_penalty(c.repetition_penalty.value_or(d.repetition_penalty));
  for (const auto& [id, bias] : c.logit_bias) (*p.mutable_logit_bias())[id] = bias;
  return p;
}

}  // namespace k3::gateway
