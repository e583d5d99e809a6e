#include "gateway/http/openai_json.h"

#include "gateway/http/request_fields.h"

#include <limits>
#include <map>
#include <utility>

#include "absl/strings/cord.h"

namespace k3::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

Status bad(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

// Reads the optional fields of one JSON object; absent and null are the
// same. Type errors name the field with its path ("'stream_options.x'").
class Fields {
 public:
  Fields(const ordered_json& object, std::string prefix = "")
      : object_(object), prefix_(std::move(prefix)) {}

  const ordered_json* get(std::string_view key) const {
    auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  // "'prefix.key'", for messages.
  std::string name(std::string_view key) const { return cat("'", prefix_, key, "'"); }

  StatusOr<std::optional<std::string>> string(std::string_view key) const {
    const ordered_json* v = get(key);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string()) return bad(cat(name(key), " must be a string"));
    return std::optional<std::string>(v->get<std::string>());
  }

  StatusOr<std::optional<bool>> boolean(std::string_view key) const {
    const ordered_json* v = get(key);
    if (v == nullptr) return std::optional<bool>();
    if (!v->is_boolean()) return bad(cat(name(key), " must be a boolean"));
    return std::optional<bool>(v->get<bool>());
  }

  StatusOr<std::optional<double>> number(std::string_view key) const {
    const ordered_json* v = get(key);
    if (v == nullptr) return std::optional<double>();
    if (!v->is_number()) return bad(cat(name(key), " must be a number"));
    return std::optional<double>(v->get<double>());
  }

  // An integer; unsigned values beyond int64 are clamped to its maximum.
  StatusOr<std::optional<int64_t>> integer(std::string_view key) const {
    const ordered_json* v = get(key);
    if (v == nullptr) return std::optional<int64_t>();
    if (!v->is_number_integer()) return bad(cat(name(key), " must be an integer"));
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::optional<int64_t>(std::numeric_limits<int64_t>::max());
    }
    return std::optional<int64_t>(v->get<int64_t>());
  }

  // An integer >= 1.
  StatusOr<std::optional<int64_t>> count(std::string_view key) const {
    K3_ASSIGN_OR_RETURN(std::optional<int64_t> v, integer(key));
    if (v.has_value() && *v < 1) return bad(cat(name(key), " must be at least 1"));
    return v;
  }

  // A nested object's fields, or nullopt when absent.
  StatusOr<std::optional<Fields>> object(std::string_view key) const {
    const ordered_json* v = get(key);
    if (v == nullptr) return std::optional<Fields>();
    if (!v->is_object()) return bad(cat(name(key), " must be an object"));
    return std::optional<Fields>(Fields(*v, cat(prefix_, key, ".")));
  }

 private:
  const ordered_json& object_;
  std::string prefix_;
};

StatusOr<ordered_json> parse_body(std::string_view body) {
  K3_ASSIGN_OR_RETURN(ordered_json request, parse_json_text(body, ""));
  if (!request.is_object()) return bad("the request body must be a JSON object");
  return request;
}

// A string or an array of strings.
StatusOr<std::vector<std::string>> parse_stop(const Fields& f) {
  std::vector<std::string> stop;
  const ordered_json* v = f.get("stop");
  if (v == nullptr) return stop;
  if (v->is_string()) {
    stop.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const ordered_json& s : *v) {
      if (!s.is_string()) return bad("'stop' must be a string or an array of strings");
      stop.push_back(s.get<std::string>());
    }
  } else {
    return bad("'stop' must be a string or an array of strings");
  }
  K3_RETURN_IF_ERROR(validate_stop(stop));
  return stop;
}

// A float field in [lo, hi] (lo excluded when `lo_open`), checked as a double
// before the cast: a float would round 2.0000001 into range.
Status parse_float(const Fields& f, std::string_view key, double lo, double hi, bool lo_open,
                   std::optional<float>& out) {
  K3_ASSIGN_OR_RETURN(std::optional<double> v, f.number(key));
  if (!v.has_value()) return absl::OkStatus();
  if (!((lo_open ? *v > lo : *v >= lo) && *v <= hi)) {
    return bad(lo_open ? cat(f.name(key), " must be greater than ", lo, " and at most ", hi)
                       : cat(f.name(key), " must be between ", lo, " and ", hi));
  }
  out = static_cast<float>(*v);
  return absl::OkStatus();
}

// `logit_bias`: an object of token ids (decimal strings, as OpenAI's JSON
// keys) to numbers.
Status parse_logit_bias(const Fields& f, std::map<int32_t, float>& out) {
  const ordered_json* v = f.get("logit_bias");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_object()) return bad("'logit_bias' must be an object of token ids to numbers");
  for (const auto& [key, bias] : v->items()) {
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (!digits || id > std::numeric_limits<int32_t>::max())
      return bad(cat("'logit_bias' key '", key, "' is not a token id"));
    if (!bias.is_number()) return bad(cat("'logit_bias' of token ", key, " must be a number"));
    const double b = bias.get<double>();
    if (!(b >= -100.0 && b <= 100.0))
      return bad(cat("'logit_bias' of token ", key, " must be between -100 and 100"));
    out[static_cast<int32_t>(id)] = static_cast<float>(b);
  }
  return absl::OkStatus();
}

// The sampling fields (OpenAI's, and vLLM's top_k, min_p, repetition_penalty).
Status parse_sampling(const Fields& f, SamplingOptions& out) {
  K3_RETURN_IF_ERROR(parse_float(f, "temperature", 0, 2, false, out.temperature));
  K3_RETURN_IF_ERROR(parse_float(f, "top_p", 0, 1, true, out.top_p));
  K3_RETURN_IF_ERROR(parse_float(f, "min_p", 0, 1, false, out.min_p));
  K3_RETURN_IF_ERROR(parse_float(f, "presence_penalty", -2, 2, false, out.presence_penalty));
  K3_RETURN_IF_ERROR(parse_float(f, "frequency_penalty", -2, 2, false, out.frequency_penalty));
  K3_RETURN_IF_ERROR(parse_float(f, "repetition_penalty", 0, 10, true, out.repetition_penalty));
  K3_ASSIGN_OR_RETURN(out.top_k, f.integer("top_k"));
  K3_RETURN_IF_ERROR(parse_logit_bias(f, out.logit_bias));
  if (const ordered_json* seed = f.get("seed")) {
    if (!seed->is_number_integer()) return bad("'seed' must be an integer");
    // Negative seeds (OpenAI allows them) keep their bits.
    out.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                          : static_cast<uint64_t>(seed->get<int64_t>());
  }
  return validate_sampling(out);
}

// The fields chat and completions share, all but max_tokens.
struct CommonFields {
  std::string model;
  SamplingOptions sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  int n = 1;
};

// Parses the fields chat and completion requests share into `call`.
template <typename Call>
Status parse_common_into(const Fields& f, Call& call);

StatusOr<CommonFields> parse_common(const Fields& f) {
  CommonFields out;
  K3_ASSIGN_OR_RETURN(std::optional<std::string> model, f.string("model"));
  if (model.has_value()) out.model = std::move(*model);

  K3_RETURN_IF_ERROR(parse_sampling(f, out.sampling));
  // k3 extension (engined --expert-top-p), per request.
  K3_ASSIGN_OR_RETURN(std::optional<double> expert_top_p, f.number("k3_expert_top_p"));
  if (expert_top_p.has_value()) {
    if (!(*expert_top_p > 0.0 && *expert_top_p <= 1.0))
      return bad("'k3_expert_top_p' must be greater than 0 and at most 1");
    out.sampling.expert_top_p = static_cast<float>(*expert_top_p);
  }
  K3_RETURN_IF_ERROR(validate_sampling(out.sampling));
  K3_ASSIGN_OR_RETURN(out.stop, parse_stop(f));

  // Choices: at most kMaxChoices here, at most the free sessions at admission.
  StatusOr<std::optional<int64_t>> n = f.integer("n");
  if (!n.ok()) return with_param(n.status(), "n");
  if (n->has_value()) {
    if (**n < 1 || **n > kMaxChoices)
      return with_param(bad(cat("'n' must be between 1 and ", kMaxChoices)), "n");
    out.n = static_cast<int>(**n);
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> stream, f.boolean("stream"));
  out.stream = stream.value_or(false);
  K3_ASSIGN_OR_RETURN(std::optional<Fields> stream_options, f.object("stream_options"));
  if (stream_options.has_value()) {
    K3_ASSIGN_OR_RETURN(std::optional<bool> include_usage,
                        stream_options->boolean("include_usage"));
    out.include_usage = include_usage.value_or(false);
  }
  // Accepted: `user` is for OpenAI's abuse tracking (docs/openai-api.md).
  K3_RETURN_IF_ERROR(f.string("user").status());
  return out;
}

template <typename Call>
Status parse_common_into(const Fields& f, Call& call) {
  K3_ASSIGN_OR_RETURN(CommonFields common, parse_common(f));
  call.model = std::move(common.model);
  call.sampling = common.sampling;
  call.stop = std::move(common.stop);
  call.stream = common.stream;
  call.include_usage = common.include_usage;
  call.n = common.n;
  return absl::OkStatus();
}

// `thinking`: a bool, or Anthropic's {"type": "enabled"|"disabled"} (its
// budget_tokens is refused by the field lists).
StatusOr<std::optional<bool>> parse_thinking_field(const Fields& f) {
  const ordered_json* v = f.get("thinking");
  if (v == nullptr) return std::optional<bool>();
  if (v->is_boolean()) return std::optional<bool>(v->get<bool>());
  if (v->is_object()) {
    auto type = v->find("type");
    if (type != v->end() && *type == "enabled") return std::optional<bool>(true);
    if (type != v->end() && *type == "disabled") return std::optional<bool>(false);
    return bad("'thinking.type' must be \"enabled\" or \"disabled\"");
  }
  return bad("'thinking' must be a boolean or an object");
}

// K3's efforts, under the name the client sent them ("'thinking_effort'").
Status check_k3_effort(const std::string& effort, std::string_view field) {
  if (effort == "low" || effort == "high" || effort == "max") return absl::OkStatus();
  return bad(cat(field, " '", effort, "' is not supported: low, high or max"));
}

// OpenAI's reasoning_effort in K3's terms: low -> low, medium -> high,
// high -> max.
StatusOr<std::string> map_reasoning_effort(const std::string& effort) {
  if (effort == "low") return std::string("low");
  if (effort == "medium") return std::string("high");
  if (effort == "high") return std::string("max");
  return bad(cat("'reasoning_effort' '", effort, "' is not supported: low, medium or high"));
}

// Fills render["thinking"] and render["thinking_effort"] (see the header for
// the precedence: later assignments win).
Status parse_thinking(const Fields& f, ordered_json& render) {
  std::optional<bool> thinking;
  std::optional<std::string> effort;
  K3_ASSIGN_OR_RETURN(std::optional<Fields> kwargs, f.object("chat_template_kwargs"));
  if (kwargs.has_value()) {
    K3_ASSIGN_OR_RETURN(std::optional<bool> enable, kwargs->boolean("enable_thinking"));
    if (enable.has_value()) thinking = enable;
    K3_ASSIGN_OR_RETURN(std::optional<bool> kw_thinking, kwargs->boolean("thinking"));
    if (kw_thinking.has_value()) thinking = kw_thinking;
    K3_ASSIGN_OR_RETURN(std::optional<std::string> kw_effort, kwargs->string("thinking_effort"));
    if (kw_effort.has_value()) {
      K3_RETURN_IF_ERROR(check_k3_effort(*kw_effort, kwargs->name("thinking_effort")));
      effort = std::move(kw_effort);
    }
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> enable, f.boolean("enable_thinking"));
  if (enable.has_value()) thinking = enable;
  K3_ASSIGN_OR_RETURN(std::optional<bool> top_thinking, parse_thinking_field(f));
  if (top_thinking.has_value()) thinking = top_thinking;
  K3_ASSIGN_OR_RETURN(std::optional<std::string> reasoning_effort, f.string("reasoning_effort"));
  if (reasoning_effort.has_value()) {
    K3_ASSIGN_OR_RETURN(effort, map_reasoning_effort(*reasoning_effort));
  }
  K3_ASSIGN_OR_RETURN(std::optional<std::string> thinking_effort, f.string("thinking_effort"));
  if (thinking_effort.has_value()) {
    K3_RETURN_IF_ERROR(check_k3_effort(*thinking_effort, f.name("thinking_effort")));
    effort = std::move(thinking_effort);
  }

  if (thinking.has_value()) render["thinking"] = *thinking;
  if (effort.has_value()) render["thinking_effort"] = std::move(*effort);
  return absl::OkStatus();
}

// The token's bytes as OpenAI's list of integers.
json bytes_json(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

// Chat's {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}.
json chat_logprobs_json(const std::optional<std::vector<LogprobEntry>>& logprobs) {
  if (!logprobs) return nullptr;
  json content = json::array();
  for (const LogprobEntry& e : *logprobs) {
    json top = json::array();
    for (const TokenLogprob& t : e.top)
      top.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes_json(t.bytes)}});
    content.push_back({{"token", e.token},
                       {"logprob", e.logprob},
                       {"bytes", bytes_json(e.bytes)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

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

json tool_call_json(const ToolCallFull& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

json base_object(std::string_view id, int64_t created, std::string_view model,
                 std::string_view object) {
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}

}  // namespace

// Chat fields of OpenAI's API this server does not do, refused by name
// rather than ignored (docs/openai-api.md); and those it accepts with no
// effect, type-checked.
Status refuse_unsupported_chat_fields(const Fields& f) {
  for (const char* key : {"audio", "functions", "function_call", "prediction", "web_search_options",
                          "verbosity", "metadata"}) {
    if (f.get(key) != nullptr) return bad(cat(f.name(key), " is not supported"));
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> store, f.boolean("store"));
  if (store.value_or(false))
    return bad(
        "'store' true is not supported: this server keeps no "
        "completions");
  K3_ASSIGN_OR_RETURN(std::optional<std::string> tier, f.string("service_tier"));
  if (tier.has_value() && *tier != "auto" && *tier != "default")
    return bad(cat("'service_tier' '", *tier, "' is not supported: auto or default"));
  if (const ordered_json* modalities = f.get("modalities")) {
    if (*modalities != ordered_json::array({"text"}))
      return bad("'modalities' is not supported beyond [\"text\"]");
  }
  // OpenAI's end-user and cache-routing ids: nothing here uses them.
  K3_RETURN_IF_ERROR(f.string("safety_identifier").status());
  K3_RETURN_IF_ERROR(f.string("prompt_cache_key").status());
  return absl::OkStatus();
}

StatusOr<ChatCall> parse_chat_request(std::string_view body) {
  K3_ASSIGN_OR_RETURN(const ordered_json request, parse_body(body));
  K3_RETURN_IF_ERROR(check_request_fields("/v1/chat/completions", request));
  const Fields f(request);
  ChatCall call;
  K3_RETURN_IF_ERROR(parse_common_into(f, call));
  K3_RETURN_IF_ERROR(refuse_unsupported_chat_fields(f));

  const ordered_json* messages = f.get("messages");
  if (messages == nullptr) return bad("'messages' is required");
  if (!messages->is_array()) return bad("'messages' must be an array");
  if (messages->empty()) return bad("'messages' must not be empty");
  call.render["messages"] = *messages;

  if (const ordered_json* tools = f.get("tools")) {
    if (!tools->is_array()) return bad("'tools' must be an array");
    call.render["tools"] = *tools;
  }
  if (const ordered_json* choice = f.get("tool_choice")) {
    if (!choice->is_string() && !choice->is_object()) {
      return bad("'tool_choice' must be a string or an object");
    }
    call.render["tool_choice"] = *choice;
  }
  if (const ordered_json* format = f.get("response_format")) {
    if (!format->is_object()) return bad("'response_format' must be an object");
    auto type = format->find("type");
    // {"type": "text"} is the default: no response-format note in the prompt.
    if (type == format->end() || *type != "text") call.render["response_format"] = *format;
  }
  K3_RETURN_IF_ERROR(parse_thinking(f, call.render));
  // parallel_tool_calls: false allows at most one call (the output constraint).
  K3_ASSIGN_OR_RETURN(std::optional<bool> parallel, f.boolean("parallel_tool_calls"));
  call.parallel_tool_calls = parallel.value_or(true);

  K3_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, f.count("max_tokens"));
  K3_ASSIGN_OR_RETURN(std::optional<int64_t> max_completion_tokens,
                      f.count("max_completion_tokens"));
  if (max_tokens.has_value() && max_completion_tokens.has_value()) {
    call.max_tokens = std::min(*max_tokens, *max_completion_tokens);
  } else {
    call.max_tokens = max_tokens.value_or(max_completion_tokens.value_or(0));
  }

  K3_ASSIGN_OR_RETURN(std::optional<bool> logprobs, f.boolean("logprobs"));
  call.logprobs = logprobs.value_or(false);
  K3_ASSIGN_OR_RETURN(std::optional<int64_t> top_logprobs, f.integer("top_logprobs"));
  if (top_logprobs.has_value()) {
    if (*top_logprobs < 0 || *top_logprobs > kMaxTopLogprobs)
      return bad(cat("'top_logprobs' must be between 0 and ", kMaxTopLogprobs));
    if (!call.logprobs && *top_logprobs > 0) return bad("'top_logprobs' needs 'logprobs': true");
    call.top_logprobs = static_cast<int>(*top_logprobs);
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> as_ids, f.boolean("return_tokens_as_token_ids"));
  call.tokens_as_ids = as_ids.value_or(false);
  return call;
}

StatusOr<CompletionCall> parse_completion_request(std::string_view body) {
  K3_ASSIGN_OR_RETURN(const ordered_json request, parse_body(body));
  K3_RETURN_IF_ERROR(check_request_fields("/v1/completions", request));
  const Fields f(request);
  CompletionCall call;
  K3_RETURN_IF_ERROR(parse_common_into(f, call));

  // The prompt: "text", [ids], or a batch of one: ["text"] or [[ids]].
  constexpr std::string_view kPromptForms =
      "'prompt' must be a string, an array of token ids, or an array holding exactly one of "
      "those";
  const ordered_json* prompt = f.get("prompt");
  if (prompt == nullptr) return bad("'prompt' is required");
  if (prompt->is_array() && prompt->size() == 1 &&
      ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    prompt = &(*prompt)[0];
  }
  if (prompt->is_string()) {
    call.prompt = prompt->get<std::string>();
  } else if (prompt->is_array()) {
    if (prompt->empty()) return bad("'prompt' must not be an empty array");
    for (const ordered_json& id : *prompt) {
      if (!id.is_number_integer()) return bad(std::string(kPromptForms));
      const bool in_range =
          id.is_number_unsigned()
              ? id.get<uint64_t>() <= std::numeric_limits<int32_t>::max()
              : id.get<int64_t>() >= 0 && id.get<int64_t>() <= std::numeric_limits<int32_t>::max();
      if (!in_range) return bad("'prompt' token ids must be between 0 and 2147483647");
      call.prompt_ids.push_back(id.get<int32_t>());
    }
    call.prompt_is_ids = true;
  } else {
    return bad(std::string(kPromptForms));
  }

  K3_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, f.count("max_tokens"));
  if (max_tokens.has_value()) call.max_tokens = *max_tokens;
  K3_ASSIGN_OR_RETURN(std::optional<bool> echo, f.boolean("echo"));
  call.echo = echo.value_or(false);

  K3_ASSIGN_OR_RETURN(std::optional<std::string> suffix, f.string("suffix"));
  if (suffix.has_value() && !suffix->empty()) return bad("'suffix' is not supported");
  if (const ordered_json* best_of = f.get("best_of")) {
    if (!best_of->is_number_integer() || best_of->get<int64_t>() != 1) {
      return bad("'best_of' must be 1");
    }
  }
  // Completions' logprobs is a count: each token's and the N most likely.
  K3_ASSIGN_OR_RETURN(std::optional<int64_t> logprobs, f.integer("logprobs"));
  if (logprobs.has_value()) {
    if (*logprobs < 0 || *logprobs > kMaxTopLogprobs)
      return bad(cat("'logprobs' must be between 0 and ", kMaxTopLogprobs));
    call.logprobs = static_cast<int>(*logprobs);
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> as_ids, f.boolean("return_tokens_as_token_ids"));
  call.tokens_as_ids = as_ids.value_or(false);
  return call;
}

// ---- responses ----

json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
          {"k3_restored_tokens", usage.restored_tokens}};
}

namespace {

json chat_message_json(const OutputMessage& message) {
  json m = {{"role", "assistant"}};
  // OpenAI sends content null for a message that only calls tools.
  if (message.content.empty() && !message.tool_calls.empty()) {
    m["content"] = nullptr;
  } else {
    m["content"] = message.content;
  }
  if (!message.reasoning_content.empty()) m["reasoning_content"] = message.reasoning_content;
  if (!message.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCallFull& call : message.tool_calls) calls.push_back(tool_call_json(call));
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

}  // namespace

json chat_completion_json(std::string_view id, int64_t created, std::string_view model,
                          const std::vector<ChoiceResult>& choices, const Usage& usage) {
  json out = base_object(id, created, model, "chat.completion");
  out["choices"] = json::array();
  for (size_t i = 0; i < choices.size(); ++i)
    out["choices"].push_back({{"index", i},
                              {"message", chat_message_json(choices[i].message)},
                              {"logprobs", chat_logprobs_json(choices[i].message.logprobs)},
                              {"finish_reason", finish_reason_name(choices[i].reason)}});
  out["usage"] = usage_json(usage);
  return out;
}

json chat_completion_json(std::string_view id, int64_t created, std::string_view model,
                          const OutputMessage& message, const Finish& finish) {
  return chat_completion_json(id, created, model, {ChoiceResult{message, finish.reason}},
                              finish.usage);
}

json chat_chunk_json(std::string_view id, int64_t created, std::string_view model,
                     const OutputDelta& delta, bool first) {
  json d = json::object();
  if (first) d["role"] = "assistant";
  if (!delta.reasoning_content.empty()) d["reasoning_content"] = delta.reasoning_content;
  if (!delta.content.empty() || (first && delta.tool_calls.empty())) d["content"] = delta.content;
  if (!delta.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCallOut& call : delta.tool_calls) {
      json c = {{"index", call.index}};
      json function = json::object();
      // A call's first delta carries its id and name (and the type).
      const bool opening = !call.id.empty() || !call.name.empty();
      if (!call.id.empty()) c["id"] = call.id;
      if (opening) c["type"] = "function";
      if (!call.name.empty()) function["name"] = call.name;
      function["arguments"] = call.arguments;
      c["function"] = std::move(function);
      calls.push_back(std::move(c));
    }
    d["tool_calls"] = std::move(calls);
  }
  json out = base_object(id, created, model, "chat.completion.chunk");
  out["choices"] = json::array({{{"index", delta.index},
                                 {"delta", std::move(d)},
                                 {"logprobs", chat_logprobs_json(delta.logprobs)},
                                 {"finish_reason", nullptr}}});
  return out;
}

json chat_finish_chunk_json(std::string_view id, int64_t created, std::string_view model,
                            FinishReason reason, int index) {
  json out = base_object(id, created, model, "chat.completion.chunk");
  out["choices"] = json::array({{{"index", index},
                                 {"delta", json::object()},
                                 {"logprobs", nullptr},
                                 {"finish_reason", finish_reason_name(reason)}}});
  return out;
}

json usage_chunk_json(std::string_view id, int64_t created, std::string_view model,
                      const Usage& usage, bool chat) {
  json out = base_object(id, created, model, chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return out;
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

json models_json(const std::vector<ModelEntry>& models) {
  json data = json::array();
  for (const ModelEntry& m : models) {
    data.push_back(
        {{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", m.owned_by}});
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

// ---- errors ----

json error_json(const Status& status) {
  const int http = http_status(status);
  const std::string param = error_param(status);
  return {{"error",
           {{"message", msg(status)},
            {"type", http < 500 ? "invalid_request_error" : "server_error"},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", error_code(status)}}}};
}

// ---- framing ----

std::string dump_body(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) {
  return cat("data: ", dump_body(j), "\n\n");
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

}  // namespace k3::gateway
