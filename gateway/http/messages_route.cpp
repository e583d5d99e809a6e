#include "gateway/http/messages_route.h"

#include <optional>
#include <string>

#include "gateway/core/json_text.h"
#include "gateway/core/random_id.h"
#include "gateway/http/messages_events.h"
#include "gateway/http/messages_protocol.h"

namespace k3::gateway {
namespace {

using nlohmann::json;

HttpResponse json_response(const json& j) {
  HttpResponse r;
  r.body = dump_body(j);
  return r;
}

// The route's unknown-field policy (gateway --strict-fields).
UnknownFields messages_unknown_fields(const GatewayCore& core) {
  return unknown_fields_for(core.config().strict_fields, "docs/messages-api.md");
}

// Parsed and prepared as a chat call (the model checked, the prompt
// rendered and tokenized, the output constraint built).
StatusOr<PreparedRequest> prepare(GatewayCore* core, const HttpRequest& req,
                                  MessagesEndpoint endpoint, UnknownFields& unknown, bool* stream) {
  K3_ASSIGN_OR_RETURN(MessagesCall call, parse_messages_request(req.body, endpoint, unknown));
  *stream = call.chat.stream;
  return core->generator().prepare_chat(call.chat);
}

void count_tokens(GatewayCore* core, const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  bool stream = false;
  UnknownFields unknown = messages_unknown_fields(*core);
  auto prep = prepare(core, req, MessagesEndpoint::kCountTokens, unknown, &stream);
  if (!prep.ok()) return ex->reply(messages_error_response(prep.status()));
  HttpResponse r = json_response({{"input_tokens", prep->prompt_ids.size()}});
  name_ignored_fields(req, unknown, r);
  ex->reply(std::move(r));
}

// As HttpApi::generate for chat: one JSON answer, or a stream whose head and
// message_start go out once the request is admitted or queued (an error
// before that is a plain HTTP error), pings while there is nothing to send.
void create(GatewayCore* core, const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  bool stream = false;
  UnknownFields unknown = messages_unknown_fields(*core);
  const StatusOr<PreparedRequest> prep =
      prepare(core, req, MessagesEndpoint::kCreate, unknown, &stream);
  RequestContext rc;
  rc.id = random_id("msg_");
  rc.alive = Exchange::alive_fn(ex);
  const std::string model = core->generator().model_name();

  if (!stream) {
    rc.keep_partial_at_deadline = true;
    auto result =
        core->serve("messages", prep, rc, [&ex](const OutputDelta&) { return ex->alive(); });
    if (!result.ok()) return ex->reply(messages_error_response(result.status()));
    const ChoiceResult& choice = result->choices.at(0);
    HttpResponse r = json_response(
        messages_response_json(rc.id, model, choice, choice.stop_sequence, result->usage));
    if (result->truncated_at_deadline) r.headers.emplace_back("X-K3-Truncated", "deadline");
    name_ignored_fields(req, unknown, r);
    return ex->reply(std::move(r));
  }

  MessagesEventWriter events(rc.id, model);
  bool started = false;
  auto open_stream = [&] {
    if (started) return true;
    started = true;
    HttpResponse head;
    head.content_type = "text/event-stream";
    head.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
    name_ignored_fields(req, unknown, head);
    return ex->start_stream(head) &&
           ex->write(events.start(static_cast<int64_t>(prep->prompt_ids.size())));
  };
  auto send = [&](const std::string& text) {
    return open_stream() && (text.empty() || ex->write(text));
  };
  rc.on_progress = [&](const ProgressNote& note) { return send(MessagesEventWriter::ping(note)); };
  std::optional<FinishReason> reason;
  std::optional<std::string> stop_sequence;
  auto result = core->serve("messages", prep, rc, [&](const OutputDelta& delta) {
    if (delta.finish) {
      reason = delta.finish;
      stop_sequence = delta.stop_sequence;
    }
    return send(events.delta(delta));
  });
  if (!result.ok()) {
    if (!started) return ex->reply(messages_error_response(result.status()));
    ex->write(MessagesEventWriter::error(result.status()));
    return ex->end_stream();
  }
  send(events.finish(reason.value_or(FinishReason::kStop), stop_sequence, result->usage));
  ex->end_stream();
}

}  // namespace

bool is_messages_path(const std::string& path) {
  return path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0;
}

void add_messages_routes(Router& router, GatewayCore* core) {
  using Ex = std::shared_ptr<Exchange>;
  router.add(
      "POST", "/v1/messages",
      [core](const HttpRequest& req, const Ex& ex, const std::string&) { create(core, req, ex); });
  router.add("POST", "/v1/messages/count_tokens",
             [core](const HttpRequest& req, const Ex& ex, const std::string&) {
               count_tokens(core, req, ex);
             });
}

}  // namespace k3::gateway
