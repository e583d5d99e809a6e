#include "gateway/http/completion_protocol.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "gateway/http/common_fields.h"
#include "gateway/http/field_reader.h"
#include "gateway/http/request_fields.h"
#include "gateway/http/response_object.h"

namespace k3::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Completions' {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
json completion_logprobs_json(const std::optional<std::vector<LogprobEntry>>& logprobs) {
  if (!logprobs) return nullptr;
  json tokens = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  for (const LogprobEntry& e : *logprobs) {
    tokens.push_back(e.token);
    values.push_back(e.logprob);
    json top = json::object();
    for (const TokenLogprob& t : e.top)
      if (!top.contains(t.token)) top[t.token] = t.logprob;  // best first: keep the best
    tops.push_back(std::move(top));
    offsets.push_back(e.text_offset);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace

StatusOr<CompletionCall> parse_completion_request(std::string_view body) {
  UnknownFields strict(UnknownFieldPolicy::kRefuse);
  return parse_completion_request(body, strict);
}

StatusOr<CompletionCall> parse_completion_request(std::string_view body, UnknownFields& unknown) {
  K3_ASSIGN_OR_RETURN(ordered_json request, parse_body(body));
  K3_RETURN_IF_ERROR(check_request_fields("/v1/completions", request, unknown));
  const FieldReader f(request);
  CompletionCall call;
  K3_RETURN_IF_ERROR(parse_common_into(f, call));

  // The prompt: "text", [ids], or a batch of one: ["text"] or [[ids]].
  constexpr std::string_view kPromptForms =
      "'prompt' must be a string, an array of token ids, or an array holding exactly one of "
      "those";
  const ordered_json* prompt = f.get("prompt");
  if (prompt == nullptr) return invalid("'prompt' is required");
  if (prompt->is_array() && prompt->size() == 1 &&
      ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    prompt = &(*prompt)[0];
  }
  if (prompt->is_string()) {
    call.prompt = prompt->get<std::string>();
  } else if (prompt->is_array()) {
    if (prompt->empty()) return invalid("'prompt' must not be an empty array");
    for (const ordered_json& id : *prompt) {
      if (!id.is_number_integer()) return invalid(std::string(kPromptForms));
      const bool in_range =
          id.is_number_unsigned()
              ? id.get<uint64_t>() <= std::numeric_limits<int32_t>::max()
              : id.get<int64_t>() >= 0 && id.get<int64_t>() <= std::numeric_limits<int32_t>::max();
      if (!in_range) return invalid("'prompt' token ids must be between 0 and 2147483647");
      call.prompt_ids.push_back(id.get<int32_t>());
    }
    call.prompt_is_ids = true;
  } else {
    return invalid(std::string(kPromptForms));
  }

  K3_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, f.count("max_tokens"));
  if (max_tokens.has_value()) call.max_tokens = *max_tokens;
  K3_ASSIGN_OR_RETURN(std::optional<bool> echo, f.boolean("echo"));
  call.echo = echo.value_or(false);

  K3_ASSIGN_OR_RETURN(std::optional<std::string> suffix, f.string("suffix"));
  if (suffix.has_value() && !suffix->empty()) return invalid("'suffix' is not supported");
  if (const ordered_json* best_of = f.get("best_of")) {
    if (!best_of->is_number_integer() || best_of->get<int64_t>() != 1) {
      return invalid("'best_of' must be 1");
    }
  }
  // Completions' logprobs is a count: each token's and the N most likely.
  K3_ASSIGN_OR_RETURN(std::optional<int64_t> logprobs, f.integer("logprobs"));
  if (logprobs.has_value()) {
    if (*logprobs < 0 || *logprobs > api::kMaxTopLogprobs)
      return invalid(cat("'logprobs' must be between 0 and ", api::kMaxTopLogprobs));
    call.logprobs = static_cast<int>(*logprobs);
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> as_ids, f.boolean("return_tokens_as_token_ids"));
  call.tokens_as_ids = as_ids.value_or(false);
  return call;
}

json completion_json(std::string_view id, int64_t created, std::string_view model,
                     const std::vector<ChoiceResult>& choices, const Usage& usage) {
  json out = base_object(id, created, model, "text_completion");
  out["choices"] = json::array();
  for (size_t i = 0; i < choices.size(); ++i)
    out["choices"].push_back({{"text", choices[i].message.content},
                              {"index", i},
                              {"logprobs", completion_logprobs_json(choices[i].message.logprobs)},
                              {"finish_reason", finish_reason_name(choices[i].reason)}});
  out["usage"] = usage_json(usage);
  return out;
}

json completion_json(std::string_view id, int64_t created, std::string_view model,
                     std::string_view text, const Finish& finish,
                     const std::optional<std::vector<LogprobEntry>>& logprobs) {
  ChoiceResult c;
  c.message.content = std::string(text);
  c.message.logprobs = logprobs;
  c.reason = finish.reason;
  return completion_json(id, created, model, {c}, finish.usage);
}

json completion_chunk_json(std::string_view id, int64_t created, std::string_view model,
                           std::string_view text, std::optional<FinishReason> finish,
                           const std::optional<std::vector<LogprobEntry>>& logprobs, int index) {
  json out = base_object(id, created, model, "text_completion");
  json choice = {{"text", text},
                 {"index", index},
                 {"logprobs", completion_logprobs_json(logprobs)},
                 {"finish_reason", nullptr}};
  if (finish.has_value()) choice["finish_reason"] = finish_reason_name(*finish);
  out["choices"] = json::array({std::move(choice)});
  return out;
}

}  // namespace k3::gateway
