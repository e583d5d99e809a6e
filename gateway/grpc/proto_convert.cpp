#include "gateway/grpc/proto_convert.h"

#include <algorithm>
#include <limits>

#include "gateway/core/json_text.h"
#include "shared/chat/xtml_render.h"

namespace k3::gateway {
namespace {

using nlohmann::ordered_json;

Status bad(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

// The OpenAI message object for one ChatMessage: proto3 strings cannot be
// absent, so empty ones are left out (as a client would leave them out).
ordered_json message_json(const k3serve::v1::ChatMessage& m) {
  ordered_json out = ordered_json::object();
  out["role"] = m.role();
  if (!m.content().empty()) out["content"] = m.content();
  if (!m.name().empty()) out["name"] = m.name();
  if (!m.reasoning_content().empty()) out["reasoning_content"] = m.reasoning_content();
  if (m.tool_calls_size() > 0) {
    ordered_json calls = ordered_json::array();
    for (const k3serve::v1::ToolCall& call : m.tool_calls()) {
      ordered_json c = ordered_json::object();
      if (!call.id().empty()) c["id"] = call.id();
      c["type"] = "function";
      // Arguments stay JSON text: render_chat parses them (keeping key order).
      c["function"] = {{"name", call.name()}, {"arguments", call.arguments()}};
      calls.push_back(std::move(c));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (!m.tool_call_id().empty()) out["tool_call_id"] = m.tool_call_id();
  return out;
}

SamplingOptions sampling_from_proto(const k3serve::v1::Sampling& s) {
  SamplingOptions out;
  if (s.has_temperature()) out.temperature = s.temperature();
  if (s.has_top_p()) out.top_p = s.top_p();
  if (s.has_seed()) out.seed = s.seed();
  if (s.has_top_k()) out.top_k = s.top_k();
  if (s.has_min_p()) out.min_p = s.min_p();
  if (s.has_presence_penalty()) out.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) out.frequency_penalty = s.frequency_penalty();
  if (s.has_repetition_penalty()) out.repetition_penalty = s.repetition_penalty();
  for (const auto& [id, bias] : s.logit_bias()) out.logit_bias[id] = bias;
  if (s.has_expert_top_p()) out.expert_top_p = s.expert_top_p();
  return out;
}

uint32_t saturate(int64_t v) {
  return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, std::numeric_limits<uint32_t>::max()));
}

}  // namespace

// The sampling and stop fields both requests carry (validated); gRPC calls
// always stream.
template <typename Request, typename Call>
Status sampling_and_stop(const Request& request, Call& call) {
  call.sampling = sampling_from_proto(request.sampling());
  K3_RETURN_IF_ERROR(check_client_sampling(call.sampling));
  call.stop.assign(request.stop().begin(), request.stop().end());
  K3_RETURN_IF_ERROR(validate_stop(call.stop));
  call.stream = true;
  return absl::OkStatus();
}

// `n` (0: unset, one choice) in [1, api::kMaxChoices].
StatusOr<int> choices_from_proto(uint32_t n) {
  if (n > static_cast<uint32_t>(api::kMaxChoices))
    return bad(cat("'n' must be between 1 and ", api::kMaxChoices));
  return std::max<int>(1, static_cast<int>(n));
}

StatusOr<ChatCall> chat_call_from_proto(const k3serve::v1::ChatRequest& request) {
  ChatCall call;
  call.model = request.model();
  if (request.messages_size() == 0) return bad("'messages' must not be empty");
  ordered_json messages = ordered_json::array();
  for (int i = 0; i < request.messages_size(); ++i) {
    const k3serve::v1::ChatMessage& m = request.messages(i);
    // Stricter than the reference, which skips unknown roles.
    const std::string& role = m.role();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" &&
        role != "tool") {
      return bad(cat("'messages[", i, "].role' '", role,
                     "' is not supported: system, developer, user, assistant or tool"));
    }
    messages.push_back(message_json(m));
  }
  call.render["messages"] = std::move(messages);

  if (!request.tools_json().empty()) {
    K3_ASSIGN_OR_RETURN(ordered_json tools, parse_json_text(request.tools_json(), "'tools_json'"));
    if (!tools.is_array()) return bad("'tools_json' must be a JSON array");
    call.render["tools"] = std::move(tools);
  }
  const std::string& choice = request.tool_choice();
  if (choice == "auto" || choice == "none" || choice == "required") {
    call.render["tool_choice"] = choice;
  } else if (!choice.empty()) {
    StatusOr<ordered_json> object = parse_json_text(choice, "'tool_choice'");
    if (!object.ok() || !object->is_object()) {
      return bad("'tool_choice' must be auto, none, required or a JSON object");
    }
    call.render["tool_choice"] = *std::move(object);
  }
  if (!request.response_format_json().empty()) {
    K3_ASSIGN_OR_RETURN(ordered_json format,
                        parse_json_text(request.response_format_json(), "'response_format_json'"));
    if (!format.is_object()) return bad("'response_format_json' must be a JSON object");
    // {"type": "text"} is the default: no note in the prompt (as over HTTP).
    auto type = format.find("type");
    if (type == format.end() || *type != "text") call.render["response_format"] = std::move(format);
  }
  // The renderer normalises these (chat::chat_options); an empty
  // thinking_effort is unset: the default, max.
  if (request.has_enable_thinking()) call.render["enable_thinking"] = request.enable_thinking();
  if (request.has_parallel_tool_calls()) call.parallel_tool_calls = request.parallel_tool_calls();
  if (!request.thinking_effort().empty()) {
    call.render["thinking_effort"] = request.thinking_effort();
  }
  K3_RETURN_IF_ERROR(chat::chat_options(call.render).status());

  call.max_tokens = request.max_tokens();
  call.logprobs = request.logprobs();
  if (request.top_logprobs() > 20) return bad("'top_logprobs' must be between 0 and 20");
  if (!call.logprobs && request.top_logprobs() > 0)
    return bad("'top_logprobs' needs 'logprobs': true");
  call.top_logprobs = static_cast<int>(request.top_logprobs());
  K3_ASSIGN_OR_RETURN(call.n, choices_from_proto(request.n()));
  K3_RETURN_IF_ERROR(sampling_and_stop(request, call));
  return call;
}

StatusOr<CompletionCall> completion_call_from_proto(const k3serve::v1::CompleteRequest& request) {
  CompletionCall call;
  call.model = request.model();
  const bool has_text = !request.prompt().empty();
  const bool has_ids = request.prompt_ids_size() > 0;
  if (has_text == has_ids) return bad("exactly one of 'prompt' and 'prompt_ids' must be set");
  if (has_text) {
    call.prompt = request.prompt();
  } else {
    for (const int32_t id : request.prompt_ids()) {
      if (id < 0) return bad("'prompt_ids' must not be negative");
      call.prompt_ids.push_back(id);
    }
    call.prompt_is_ids = true;
  }
  if (request.max_tokens() > 0) call.max_tokens = request.max_tokens();
  if (request.has_logprobs()) {
    if (request.logprobs() > 20) return bad("'logprobs' must be between 0 and 20");
    call.logprobs = static_cast<int>(request.logprobs());
  }
  K3_ASSIGN_OR_RETURN(call.n, choices_from_proto(request.n()));
  K3_RETURN_IF_ERROR(sampling_and_stop(request, call));
  return call;
}

void usage_to_proto(const Usage& usage, k3serve::v1::Usage* out) {
  out->set_prompt_tokens(saturate(usage.prompt_tokens));
  out->set_completion_tokens(saturate(usage.completion_tokens));
  out->set_total_tokens(saturate(usage.prompt_tokens + usage.completion_tokens));
  out->set_cached_tokens(saturate(usage.cached_tokens));
  out->set_restored_tokens(saturate(usage.restored_tokens));
}

void progress_to_proto(const ProgressNote& note, k3serve::v1::Progress* out) {
  if (note.phase == ProgressNote::Phase::kQueued) {
    out->set_queued(saturate(note.queued));
    out->set_eta_s(-1);  // nothing is read yet: no estimate
    return;
  }
  out->set_done(saturate(note.done));
  out->set_total(saturate(note.total));
  out->set_eta_s(note.eta_s);
}

void logprobs_to_proto(const OutputDelta& delta,
                       google::protobuf::RepeatedPtrField<k3serve::v1::OutputLogprob>* out) {
  if (!delta.logprobs) return;
  auto fill = [](const TokenLogprob& t, k3serve::v1::OutputLogprob* o) {
    o->set_id(t.id);
    o->set_token(t.bytes);
    o->set_logprob(t.logprob);
  };
  for (const LogprobEntry& e : *delta.logprobs) {
    k3serve::v1::OutputLogprob* o = out->Add();
    fill(e, o);
    for (const TokenLogprob& t : e.top) fill(t, o->add_top());
  }
}

void delta_to_proto(const OutputDelta& delta, k3serve::v1::ChatDelta* out) {
  logprobs_to_proto(delta, out->mutable_logprobs());
  out->set_reasoning_content(delta.reasoning_content);
  out->set_content(delta.content);
  for (const ToolCallOut& call : delta.tool_calls) {
    k3serve::v1::ToolCallDelta* d = out->add_tool_calls();
    d->set_index(static_cast<uint32_t>(call.index));
    d->set_id(call.id);
    d->set_name(call.name);
    d->set_arguments(call.arguments);
  }
}

}  // namespace k3::gateway
