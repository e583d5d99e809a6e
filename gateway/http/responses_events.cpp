#include "gateway/http/responses_events.h"

#include <utility>

#include "gateway/core/json_text.h"
#include "gateway/core/random_id.h"
#include "gateway/http/api_errors.h"

namespace k3::gateway {

using nlohmann::json;

json ResponseEvents::event(std::string_view type, json fields) {
  json e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : fields.items()) e[key] = std::move(value);
  return e;
}

json ResponseEvents::response() const {
  return response_json(head_, status_, output_, usage_, error_);
}

std::vector<json> ResponseEvents::start() {
  std::vector<json> out;
  out.push_back(event("response.created", {{"response", response()}}));
  out.push_back(event("response.in_progress", {{"response", response()}}));
  return out;
}

void ResponseEvents::open(Kind kind, std::vector<json>& out, const ToolCallOut* call) {
  if (kind_ != Kind::kNone) close(/*complete=*/true, out);
  kind_ = kind;
  text_.clear();
  const size_t index = output_.size();
  json item;
  if (kind == Kind::kReasoning) {
    item = {{"id", random_id("rs_")},   {"type", "reasoning"},          {"summary", json::array()},
            {"content", json::array()}, {"encrypted_content", nullptr}, {"status", "in_progress"}};
  } else if (kind == Kind::kMessage) {
    item = {{"id", random_id("msg_")},
            {"type", "message"},
            {"role", "assistant"},
            {"status", "in_progress"},
            {"content", json::array()}};
  } else {
    call_index_ = call->index;
    item = {{"id", random_id("fc_")}, {"type", "function_call"}, {"call_id", call->id},
            {"name", call->name},     {"arguments", ""},         {"status", "in_progress"}};
  }
  output_.push_back(item);
  out.push_back(event("response.output_item.added", {{"output_index", index}, {"item", item}}));
  const json id = item["id"];
  if (kind == Kind::kReasoning) {
    out.push_back(event("response.content_part.added",
                        {{"item_id", id},
                         {"output_index", index},
                         {"content_index", 0},
                         {"part", {{"type", "reasoning_text"}, {"text", ""}}}}));
  } else if (kind == Kind::kMessage) {
    out.push_back(event("response.content_part.added", {{"item_id", id},
                                                        {"output_index", index},
                                                        {"content_index", 0},
                                                        {"part",
                                                         {{"type", "output_text"},
                                                          {"text", ""},
                                                          {"annotations", json::array()},
                                                          {"logprobs", json::array()}}}}));
  }
}

void ResponseEvents::close(bool complete, std::vector<json>& out) {
  if (kind_ == Kind::kNone) return;
  const size_t index = output_.size() - 1;
  json& item = output_.back();
  const json id = item["id"];
  if (kind_ == Kind::kReasoning) {
    const json part = {{"type", "reasoning_text"}, {"text", text_}};
    out.push_back(
        event("response.reasoning_text.done",
              {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", text_}}));
    out.push_back(
        event("response.content_part.done",
              {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}}));
    item["content"] = json::array({part});
  } else if (kind_ == Kind::kMessage) {
    const json part = {{"type", "output_text"},
                       {"text", text_},
                       {"annotations", json::array()},
                       {"logprobs", json::array()}};
    out.push_back(event("response.output_text.done", {{"item_id", id},
                                                      {"output_index", index},
                                                      {"content_index", 0},
                                                      {"text", text_},
                                                      {"logprobs", json::array()}}));
    out.push_back(
        event("response.content_part.done",
              {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}}));
    item["content"] = json::array({part});
  } else {
    out.push_back(event(
        "response.function_call_arguments.done",
        {{"item_id", id}, {"output_index", index}, {"name", item["name"]}, {"arguments", text_}}));
    item["arguments"] = text_;
  }
  item["status"] = complete ? "completed" : "incomplete";
  out.push_back(event("response.output_item.done", {{"output_index", index}, {"item", item}}));
  kind_ = Kind::kNone;
  text_.clear();
}

void ResponseEvents::append_text(Kind kind, const std::string& text, std::vector<json>& out) {
  if (text.empty()) return;
  if (kind_ != kind) open(kind, out);
  text_ += text;
  const size_t index = output_.size() - 1;
  const json& id = output_.back()["id"];
  if (kind == Kind::kReasoning) {
    out.push_back(
        event("response.reasoning_text.delta",
              {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"delta", text}}));
  } else {
    out.push_back(event("response.output_text.delta", {{"item_id", id},
                                                       {"output_index", index},
                                                       {"content_index", 0},
                                                       {"delta", text},
                                                       {"logprobs", json::array()}}));
  }
}

std::vector<json> ResponseEvents::on_delta(const OutputDelta& delta) {
  std::vector<json> out;
  append_text(Kind::kReasoning, delta.reasoning_content, out);
  append_text(Kind::kMessage, delta.content, out);
  for (const ToolCallOut& call : delta.tool_calls) {
    // A call's first fragment names it: a new function_call item.
    if (!call.name.empty() || kind_ != Kind::kCall || call.index != call_index_)
      open(Kind::kCall, out, &call);
    if (call.arguments.empty()) continue;
    text_ += call.arguments;
    out.push_back(
        event("response.function_call_arguments.delta", {{"item_id", output_.back()["id"]},
                                                         {"output_index", output_.size() - 1},
                                                         {"delta", call.arguments}}));
  }
  return out;
}

std::vector<json> ResponseEvents::finish(FinishReason reason, const Usage& usage,
                                         int64_t reasoning_tokens) {
  std::vector<json> out;
  const bool cut = reason == FinishReason::kLength;
  close(/*complete=*/!cut, out);
  status_ = cut ? ResponseStatus::kIncomplete : ResponseStatus::kCompleted;
  usage_ = responses_usage_json(usage, reasoning_tokens);
  out.push_back(
      event(cut ? "response.incomplete" : "response.completed", {{"response", response()}}));
  return out;
}

std::vector<json> ResponseEvents::fail(const Status& status) {
  std::vector<json> out;
  close(/*complete=*/false, out);
  status_ = ResponseStatus::kFailed;
  const json e = error_json(status)["error"];
  error_ = {{"code", e["code"]}, {"message", e["message"]}};
  out.push_back(event("response.failed", {{"response", response()}}));
  return out;
}

std::string responses_sse(const json& event) {
  return cat("event: ", event["type"].get<std::string>(), "\ndata: ", dump_body(event), "\n\n");
}

}  // namespace k3::gateway
