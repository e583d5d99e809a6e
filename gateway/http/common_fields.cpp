#include "gateway/http/common_fields.h"

#include <cstdint>
#include <limits>
#include <map>
#include <optional>

#include "gateway/core/status_codes.h"

namespace k3::gateway {
namespace {

using nlohmann::ordered_json;

// A string or an array of strings.
StatusOr<std::vector<std::string>> parse_stop(const FieldReader& f) {
  std::vector<std::string> stop;
  const ordered_json* v = f.get("stop");
  if (v == nullptr) return stop;
  if (v->is_string()) {
    stop.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const ordered_json& s : *v) {
      if (!s.is_string()) return invalid("'stop' must be a string or an array of strings");
      stop.push_back(s.get<std::string>());
    }
  } else {
    return invalid("'stop' must be a string or an array of strings");
  }
  K3_RETURN_IF_ERROR(validate_stop(stop));
  return stop;
}

// A float field in [lo, hi] (lo excluded when `lo_open`), checked as a double
// before the cast: a float would round 2.0000001 into range.
Status parse_float(const FieldReader& f, std::string_view key, double lo, double hi, bool lo_open,
                   std::optional<float>& out) {
  K3_ASSIGN_OR_RETURN(std::optional<double> v, f.number(key));
  if (!v.has_value()) return absl::OkStatus();
  if (!((lo_open ? *v > lo : *v >= lo) && *v <= hi)) {
    return invalid(lo_open ? cat(f.name(key), " must be greater than ", lo, " and at most ", hi)
                           : cat(f.name(key), " must be between ", lo, " and ", hi));
  }
  out = static_cast<float>(*v);
  return absl::OkStatus();
}

// `logit_bias`: an object of token ids (decimal strings, as OpenAI's JSON
// keys) to numbers.
Status parse_logit_bias(const FieldReader& f, std::map<int32_t, float>& out) {
  const ordered_json* v = f.get("logit_bias");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_object()) return invalid("'logit_bias' must be an object of token ids to numbers");
  for (const auto& [key, bias] : v->items()) {
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (!digits || id > std::numeric_limits<int32_t>::max())
      return invalid(cat("'logit_bias' key '", key, "' is not a token id"));
    if (!bias.is_number()) return invalid(cat("'logit_bias' of token ", key, " must be a number"));
    const double b = bias.get<double>();
    if (!(b >= -100.0 && b <= 100.0))
      return invalid(cat("'logit_bias' of token ", key, " must be between -100 and 100"));
    out[static_cast<int32_t>(id)] = static_cast<float>(b);
  }
  return absl::OkStatus();
}

// The sampling fields (OpenAI's, and vLLM's top_k, min_p, repetition_penalty).
Status parse_sampling(const FieldReader& f, SamplingOptions& out) {
  K3_RETURN_IF_ERROR(parse_float(f, "temperature", 0, 2, false, out.temperature));
  K3_RETURN_IF_ERROR(parse_float(f, "top_p", 0, 1, true, out.top_p));
  K3_RETURN_IF_ERROR(parse_float(f, "min_p", 0, 1, false, out.min_p));
  K3_RETURN_IF_ERROR(parse_float(f, "presence_penalty", -2, 2, false, out.presence_penalty));
  K3_RETURN_IF_ERROR(parse_float(f, "frequency_penalty", -2, 2, false, out.frequency_penalty));
  K3_RETURN_IF_ERROR(parse_float(f, "repetition_penalty", 0, 10, true, out.repetition_penalty));
  K3_ASSIGN_OR_RETURN(out.top_k, f.integer("top_k"));
  K3_RETURN_IF_ERROR(parse_logit_bias(f, out.logit_bias));
  if (const ordered_json* seed = f.get("seed")) {
    if (!seed->is_number_integer()) return invalid("'seed' must be an integer");
    // Negative seeds (OpenAI allows them) keep their bits.
    out.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                          : static_cast<uint64_t>(seed->get<int64_t>());
  }
  return check_client_sampling(out);
}

}  // namespace

StatusOr<CommonFields> parse_common(const FieldReader& f) {
  CommonFields out;
  K3_ASSIGN_OR_RETURN(std::optional<std::string> model, f.string("model"));
  if (model.has_value()) out.model = std::move(*model);

  K3_RETURN_IF_ERROR(parse_sampling(f, out.sampling));
  // k3 extension (engined --expert-top-p), per request.
  K3_ASSIGN_OR_RETURN(std::optional<double> expert_top_p, f.number("k3_expert_top_p"));
  if (expert_top_p.has_value()) {
    if (!(*expert_top_p > 0.0 && *expert_top_p <= 1.0))
      return invalid("'k3_expert_top_p' must be greater than 0 and at most 1");
    out.sampling.expert_top_p = static_cast<float>(*expert_top_p);
  }
  K3_RETURN_IF_ERROR(check_client_sampling(out.sampling));
  K3_ASSIGN_OR_RETURN(out.stop, parse_stop(f));

  // Choices: at most api::kMaxChoices here, at most the free sessions at admission.
  StatusOr<std::optional<int64_t>> n = f.integer("n");
  if (!n.ok()) return with_param(n.status(), "n");
  if (n->has_value()) {
    if (**n < 1 || **n > api::kMaxChoices)
      return with_param(invalid(cat("'n' must be between 1 and ", api::kMaxChoices)), "n");
    out.n = static_cast<int>(**n);
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> stream, f.boolean("stream"));
  out.stream = stream.value_or(false);
  K3_ASSIGN_OR_RETURN(std::optional<FieldReader> stream_options, f.object("stream_options"));
  if (stream_options.has_value()) {
    K3_ASSIGN_OR_RETURN(std::optional<bool> include_usage,
                        stream_options->boolean("include_usage"));
    out.include_usage = include_usage.value_or(false);
  }
  // Accepted: `user` is for OpenAI's abuse tracking (docs/openai-api.md).
  K3_RETURN_IF_ERROR(f.string("user").status());
  return out;
}

}  // namespace k3::gateway
