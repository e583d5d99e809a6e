#include "gateway/http/responses_serving.h"

#include <ctime>

#include "gateway/core/json_text.h"
#include "gateway/core/random_id.h"
#include "gateway/core/status_codes.h"
#include "gateway/http/responses_events.h"
#include "gateway/http/responses_protocol.h"
#include "gateway/http/sse.h"
#include "gateway/http/wire_format.h"

namespace k3::gateway {
namespace {

HttpResponse error_reply(const Status& s) {
  HttpResponse r = error_response(http_status(s), error_code(s), msg(s), error_param(s));
  // As every route answers a full queue: OpenAI SDKs retry after this.
  if (s.code() == absl::StatusCode::kResourceExhausted) r.headers.emplace_back("Retry-After", "1");
  return r;
}

bool write_all(Exchange& ex, const std::vector<nlohmann::json>& events) {
  for (const auto& e : events)
    if (!ex.write(responses_sse(e))) return false;
  return true;
}

}  // namespace

void serve_responses(GatewayCore& core, const HttpRequest& req,
                     const std::shared_ptr<Exchange>& ex) {
  Generator& gen = core.generator();
  UnknownFields unknown = unknown_fields_for(core.config().strict_fields, "docs/responses-api.md");
  StatusOr<ResponsesCall> call = parse_responses_request(req.body, unknown);
  const StatusOr<PreparedRequest> prep =
      call.ok() ? gen.prepare_chat(call->chat) : StatusOr<PreparedRequest>(call.status());
  RequestContext rc;
  rc.id = random_id("resp_");
  rc.alive = Exchange::alive_fn(ex);
  ResponseHead head{rc.id, static_cast<int64_t>(std::time(nullptr)), gen.model_name(),
                    call.ok() ? call->echo : nlohmann::json::object()};
  ResponseEvents events(std::move(head));

  if (!call.ok() || !call->chat.stream) {
    // The request deadline cuts the reply rather than losing it.
    rc.keep_partial_at_deadline = true;
    auto result = core.serve("responses", prep, rc, [&](const OutputDelta& d) {
      if (d.index == 0) events.on_delta(d);
      return ex->alive();
    });
    if (!result.ok()) return ex->reply(error_reply(result.status()));
    events.finish(result->choices[0].reason, result->usage,
                  result->choices[0].message.reasoning_tokens);
    HttpResponse r;
    r.body = dump_body(events.response());
    if (result->truncated_at_deadline) r.headers.emplace_back("X-K3-Truncated", "deadline");
    name_ignored_fields(req, unknown, r);
    return ex->reply(std::move(r));
  }

  bool started = false;
  auto open_stream = [&] {
    if (started) return true;
    started = true;
    HttpResponse h;
    h.content_type = "text/event-stream";
    h.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
    name_ignored_fields(req, unknown, h);
    return ex->start_stream(h) && write_all(*ex, events.start());
  };
  rc.on_progress = [&](const ProgressNote& note) {
    const std::string comment = sse_progress_comment(note);
    return open_stream() && (comment.empty() || ex->write(comment));
  };
  auto result = core.serve("responses", prep, rc, [&](const OutputDelta& d) {
    return open_stream() && write_all(*ex, events.on_delta(d));
  });
  if (!result.ok()) {
    if (!started) return ex->reply(error_reply(result.status()));
    // What went out stays; the failure closes the response.
    write_all(*ex, events.fail(result.status()));
    return ex->end_stream();
  }
  if (open_stream())
    write_all(*ex, events.finish(result->choices[0].reason, result->usage,
                                 result->choices[0].message.reasoning_tokens));
  ex->end_stream();
}

}  // namespace k3::gateway
