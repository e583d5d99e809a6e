#include "gateway/grpc/grpc_api.h"

#include <optional>

#include "gateway/core/random_id.h"
#include "gateway/grpc/proto_convert.h"
#include "shared/base/log.h"
#include "shared/rpc/server.h"

namespace k3::gateway {

namespace v1 = k3serve::v1;

namespace {
constexpr const char* kNoKey =
    "missing or invalid API key: send metadata 'authorization: Bearer KEY'";
}  // namespace

Status GrpcApi::authenticate(const grpc::ServerContext* ctx) const {
  if (!core_->api_keys().enabled()) return absl::OkStatus();
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it != md.end() &&
      core_->api_keys().check_bearer(std::string_view(it->second.data(), it->second.size())))
    return absl::OkStatus();
  return absl::UnauthenticatedError(kNoKey);
}

std::shared_ptr<const rpc::TokenGate> GrpcApi::token_gate() const {
  if (!core_->api_keys().enabled()) return nullptr;
  auto g = std::make_shared<rpc::TokenGate>();
  const GatewayCore* core = core_;
  g->accepts = [core](std::string_view v) { return core->api_keys().check_bearer(v); };
  g->open_methods = {"/k3serve.v1.Gateway/Health"};
  g->missing_message = g->wrong_message = kNoKey;
  return g;
}

grpc::Status GrpcApi::Health(grpc::ServerContext*, const v1::HealthRequest*,
                             v1::HealthResponse* out) {
  rpc::fill_health("gateway", out);
  HealthReport h = core_->health();
  if (!h.ok) out->set_status(v1::HealthResponse::NOT_SERVING);
  if (h.detail["status"] != "ok") out->set_detail(h.detail.dump());  // what is missing
  return grpc::Status::OK;
}

grpc::Status GrpcApi::ListModels(grpc::ServerContext* ctx, const v1::ListModelsRequest*,
                                 v1::ListModelsResponse* out) {
  if (Status s = authenticate(ctx); !s.ok()) return rpc::to_grpc(s);
  for (const std::string& name : core_->config().served_model_names) {
    auto* m = out->add_models();
    m->set_id(name);
    m->set_created(core_->created());
    m->set_owned_by("k3serve");
    m->set_max_context(static_cast<uint64_t>(core_->generator().max_context()));
  }
  return grpc::Status::OK;
}

grpc::Status GrpcApi::Tokenize(grpc::ServerContext* ctx, const v1::TokenizeRequest* req,
                               v1::TokenizeResponse* out) {
  if (Status s = authenticate(ctx); !s.ok()) return rpc::to_grpc(s);
  if (Status s = core_->generator().check_model(req->model()); !s.ok()) return rpc::to_grpc(s);
  auto ids = core_->generator().tokenizer().encode(req->text());
  if (!ids.ok()) return rpc::to_grpc(ids.status());
  for (int32_t id : *ids) out->add_ids(id);
  return grpc::Status::OK;
}

grpc::Status GrpcApi::Detokenize(grpc::ServerContext* ctx, const v1::DetokenizeRequest* req,
                                 v1::DetokenizeResponse* out) {
  if (Status s = authenticate(ctx); !s.ok()) return rpc::to_grpc(s);
  if (Status s = core_->generator().check_model(req->model()); !s.ok()) return rpc::to_grpc(s);
  std::vector<int32_t> ids(req->ids().begin(), req->ids().end());
  auto text = core_->generator().tokenizer().decode(ids);
  if (!text.ok()) return rpc::to_grpc(text.status());
  out->set_text(*text);
  return grpc::Status::OK;
}

// Chat and Complete: authenticate, prepare, then GatewayCore::serve; until
// the first delta, Progress events (queued, the prompt's reading, repeated
// at least every progress interval); deltas; the final ChatDone per choice.
template <typename Event, typename Prepare, typename ToEvent>
grpc::Status stream_generation(GatewayCore* core, DeadlineWatchdog& watchdog,
                               grpc::ServerContext* ctx, const Status& auth, const char* api,
                               const char* id_prefix, Prepare prepare, ToEvent to_event,
                               grpc::ServerWriter<Event>* writer) {
  using Clock = DeadlineWatchdog::Clock;
  StatusOr<PreparedRequest> prep = auth.ok() ? prepare() : StatusOr<PreparedRequest>(auth);
  RequestContext rc;
  rc.id = random_id(id_prefix);
  rc.deadline = core->deadline(ctx->deadline());
  rc.alive = [ctx] { return !ctx->IsCancelled(); };
  // A Write blocked on a client that does not read is only ended by
  // cancelling the call: at the request's deadline, or when one Write has
  // waited --progress-timeout-s (the client took nothing for that long).
  std::optional<DeadlineWatchdog::Guard> cap;
  if (rc.deadline != Clock::time_point::max())
    cap.emplace(watchdog.watch(rc.deadline, [ctx] { ctx->TryCancel(); }));
  const double stall_s = core->config().progress_timeout_s;
  auto write = [&](const Event& e) {
    std::optional<DeadlineWatchdog::Guard> stall;
    if (stall_s > 0)
      stall.emplace(watchdog.watch(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(stall_s)),
                                   [ctx] { ctx->TryCancel(); }));
    return writer->Write(e);
  };
  bool delta_sent = false;
  rc.on_progress = [&](const ProgressNote& note) {
    // After the first delta the deltas carry the stream; kAdmitted says
    // nothing a client needs.
    if (delta_sent || note.phase == ProgressNote::Phase::kAdmitted) return !ctx->IsCancelled();
    Event e;
    progress_to_proto(note, e.mutable_progress());
    return write(e);
  };
  auto result = core->serve(api, prep, rc, [&](const OutputDelta& delta) {
    // A choice's end goes out with the others' in its ChatDone, below.
    OutputDelta d = delta;
    d.finish.reset();
    if (d.empty()) return !ctx->IsCancelled();
    Event e;
    e.set_index(static_cast<uint32_t>(d.index));
    to_event(d, &e);
    delta_sent = true;
    return write(e);
  });
  if (!result.ok()) return rpc::to_grpc(result.status());
  for (size_t i = 0; i < result->choices.size(); ++i) {
    Event e;
    e.set_index(static_cast<uint32_t>(i));
    auto* done = e.mutable_done();
    done->set_finish_reason(finish_reason_name(result->choices[i].reason));
    usage_to_proto(result->usage, done->mutable_usage());
    done->set_id(rc.id);
    write(e);
  }
  return grpc::Status::OK;
}

grpc::Status GrpcApi::Chat(grpc::ServerContext* ctx, const v1::ChatRequest* req,
                           grpc::ServerWriter<v1::ChatEvent>* writer) {
  auto prepare = [&]() -> StatusOr<PreparedRequest> {
    K3_ASSIGN_OR_RETURN(ChatCall call, chat_call_from_proto(*req));
    return core_->generator().prepare_chat(call);
  };
  auto to_event = [](const OutputDelta& d, v1::ChatEvent* e) {
    delta_to_proto(d, e->mutable_delta());
  };
  return stream_generation(core_, watchdog_, ctx, authenticate(ctx), "chat", "chatcmpl-", prepare,
                           to_event, writer);
}

grpc::Status GrpcApi::Complete(grpc::ServerContext* ctx, const v1::CompleteRequest* req,
                               grpc::ServerWriter<v1::CompleteEvent>* writer) {
  auto prepare = [&]() -> StatusOr<PreparedRequest> {
    K3_ASSIGN_OR_RETURN(CompletionCall call, completion_call_from_proto(*req));
    return core_->generator().prepare_completion(call);
  };
  auto to_event = [](const OutputDelta& d, v1::CompleteEvent* e) {
    e->set_text(d.content);
    logprobs_to_proto(d, e->mutable_logprobs());
  };
  return stream_generation(core_, watchdog_, ctx, authenticate(ctx), "completion", "cmpl-", prepare,
                           to_event, writer);
}

}  // namespace k3::gateway
