#include "engined/engine_service.h"

#include <algorithm>

#include "shared/base/hash.h"
#include "shared/base/log.h"
#include "shared/base/version.h"
#include "shared/rpc/server.h"

namespace k3::engined {

using k3::experts::kRemoteLatencyBounds;
using k3::experts::kRemoteLatencyBuckets;
using k3::experts::RemoteHostStats;

namespace v1 = k3serve::v1;

grpc::Status EngineServiceImpl::Health(grpc::ServerContext*, const v1::HealthRequest*,
                                       v1::HealthResponse* out) {
  rpc::fill_health("engined", out);
  return grpc::Status::OK;
}

grpc::Status EngineServiceImpl::Describe(grpc::ServerContext*, const v1::EngineDescribeRequest*,
                                         v1::EngineDescribeResponse* out) {
  const auto& m = loop_->model();
  out->set_model_fingerprint(base::hex64(m.fingerprint()));
  out->set_vocab_size(static_cast<uint32_t>(m.config().vocab_size));
  out->set_sessions(static_cast<uint32_t>(loop_->sessions()));
  out->set_max_context(static_cast<uint64_t>(m.options().max_context));
  // The model's stop tokens (checkpoint/stop_tokens.h), every one a request ends at.
  for (int32_t id : loop_->stop_ids()) out->add_eos_ids(id);
  for (const auto& seg : loop_->expertd_segments()) out->add_expertd_segments(seg);
  out->set_version(base::version());
  out->set_commit(base::git_commit());
  return grpc::Status::OK;
}

grpc::Status EngineServiceImpl::Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* req,
                                         grpc::ServerWriter<v1::GenerateEvent>* writer) {
  // Whatever this call ends with is engined's own answer (the gateway passes
  // an UNAVAILABLE naming a storage host on as it is).
  ctx->AddTrailingMetadata(rpc::kAnsweredByKey, "engined");
  engined::ServeRequest r;
  r.request_id = req->request_id();
  r.prompt.assign(req->prompt_ids().begin(), req->prompt_ids().end());
  r.max_tokens = req->max_tokens();
  const v1::SamplingParams& sp = req->sampling();
  r.sampling.temperature = sp.temperature();
  r.sampling.top_p = sp.top_p() == 0.0f ? 1.0f : sp.top_p();  // proto default: off
  r.sampling.top_k = sp.top_k();
  r.sampling.seed = sp.seed();
  r.sampling.min_p = sp.min_p();
  r.sampling.presence_penalty = sp.presence_penalty();
  r.sampling.frequency_penalty = sp.frequency_penalty();
  r.sampling.repetition_penalty = sp.repetition_penalty() == 0.0f ? 1.0f : sp.repetition_penalty();
  for (const auto& [id, bias] : sp.logit_bias()) r.sampling.logit_bias[id] = bias;
  r.stop_ids.assign(req->stop_ids().begin(), req->stop_ids().end());
  for (uint32_t p : req->checkpoint_positions()) r.checkpoint_positions.push_back(p);
  r.session_hint = req->session_hint();
  r.logprobs = req->logprobs();
  r.top_logprobs = static_cast<int>(std::min<uint32_t>(req->top_logprobs(), 1000));
  r.expert_top_p = req->expert_top_p();
  // 0 (unset) is one choice; larger values are checked by submit().
  r.n = static_cast<int>(std::min<uint32_t>(std::max<uint32_t>(req->n(), 1), 1000));
  const int choices = r.n;
  int finished = 0;
  auto log = base::logger("engined");
  if (req->sampling().has_constraint()) {
    StatusOr<std::shared_ptr<const grammar::Constraint>> c =
        constraints_ ? constraints_->compile(req->sampling().constraint())
                     : absl::FailedPreconditionError("this engined has no output constraints");
    if (!c.ok()) {
      log->info("[{}] refused: {}", req->request_id(), msg(c.status()));
      return rpc::to_grpc(c.status());
    }
    r.constraint = *std::move(c);
    r.think_budget = req->sampling().constraint().think_budget_tokens();
    r.constraint_think_only = engined::constrains_think_only(req->sampling().constraint());
  }
  auto handle = loop_->submit(std::move(r));
  if (!handle.ok()) {
    log->info("[{}] refused: {}", req->request_id(), msg(handle.status()));
    return rpc::to_grpc(handle.status());
  }
  engined::ServeEvent e;
  for (;;) {
    if (ctx->IsCancelled()) {
      (*handle)->cancel();
      log->info("[{}] cancelled by the caller", req->request_id());
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the caller");
    }
    if (!(*handle)->next(&e, 50)) continue;
    v1::GenerateEvent out;
    switch (e.kind) {
      case engined::ServeEvent::Kind::kStarted: {
        auto* s = out.mutable_started();
        s->set_session(static_cast<uint32_t>(e.plan.session));
        s->set_reused_tokens(static_cast<uint32_t>(e.plan.reused));
        s->set_restored_tokens(static_cast<uint32_t>(e.plan.restored));
        s->set_prefill_tokens(static_cast<uint32_t>(e.prefill_tokens));
        break;
      }
      case engined::ServeEvent::Kind::kProgress: {
        auto* p = out.mutable_progress();
        p->set_done(static_cast<uint32_t>(e.done));
        p->set_total(static_cast<uint32_t>(e.total));
        p->set_eta_s(e.eta_s);
        break;
      }
      case engined::ServeEvent::Kind::kToken:
        out.set_choice(static_cast<uint32_t>(e.choice));
        out.set_token(e.token);
        if (e.logprobs) {
          auto* lp = out.mutable_logprobs();
          lp->set_logprob(e.logprobs->chosen);
          for (const auto& [id, v] : e.logprobs->top) {
            auto* t = lp->add_top();
            t->set_token(id);
            t->set_logprob(v);
          }
        }
        break;
      case engined::ServeEvent::Kind::kFinished: {
        ++finished;
        out.set_choice(static_cast<uint32_t>(e.choice));
        auto* f = out.mutable_finished();
        f->set_reason(e.reason == engined::StopReason::kStop ? v1::GenerateFinished::STOP
                                                             : v1::GenerateFinished::LENGTH);
        f->set_prompt_tokens(static_cast<uint32_t>(e.prompt_tokens));
        f->set_completion_tokens(static_cast<uint32_t>(e.completion_tokens));
        f->set_prefill_seconds(e.prefill_seconds);
        f->set_decode_seconds(e.decode_seconds);
        break;
      }
      case engined::ServeEvent::Kind::kFailed:
        log->info("[{}] failed: {}", req->request_id(), msg(e.status));
        return rpc::to_grpc(e.status);
    }
    if (!writer->Write(out)) {
      (*handle)->cancel();
      return grpc::Status(grpc::StatusCode::CANCELLED, "the caller went away");
    }
    if (e.kind == engined::ServeEvent::Kind::kFinished && finished == choices)
      return grpc::Status::OK;
  }
}

grpc::Status EngineServiceImpl::Stats(grpc::ServerContext*, const v1::EngineStatsRequest*,
                                      v1::EngineStatsResponse* out) {
  const engined::EngineCounters c = loop_->counters();
  out->set_requests(c.requests);
  out->set_requests_failed(c.failed);
  out->set_requests_cancelled(c.cancelled);
  out->set_prompt_tokens(c.prompt_tokens);
  out->set_prefill_tokens(c.prefill_tokens);
  out->set_reused_tokens(c.reused_tokens);
  out->set_restored_tokens(c.restored_tokens);
  out->set_generated_tokens(c.generated_tokens);
  out->set_checkpoints_saved(c.checkpoints_saved);
  out->set_checkpoint_restores(c.checkpoint_restores);
  out->set_checkpoint_bytes(c.checkpoint_bytes);
  out->set_sessions(c.sessions);
  out->set_sessions_busy(c.sessions_busy);
  out->set_expert_requests(c.experts.requests);
  out->set_expert_hits(c.experts.hits);
  out->set_expert_reads(c.experts.reads);
  out->set_expert_bytes_read(c.experts.bytes_read);
  out->set_expert_wait_seconds(c.experts.wait_seconds);
  out->set_prefill_seconds(c.prefill_seconds);
  out->set_decode_seconds(c.decode_seconds);
  out->set_prefill_tokens_per_second(c.prefill_tokens_per_second);
  out->set_checkpoint_budget_bytes(c.checkpoint_budget_bytes);
  out->set_checkpoint_evictions(c.checkpoint_evictions);
  out->set_checkpoint_failed_saves(c.checkpoint_failed_saves);
  out->set_snapshots_saved(c.snapshots_saved);
  out->set_checkpoint_disk_bytes(c.checkpoint_disk_bytes);
  out->set_checkpoint_disk_budget_bytes(c.checkpoint_disk_budget_bytes);
  out->set_snapshot_writes_dropped(c.snapshot_writes_dropped);
  out->set_session_evictions(c.session_evictions);
  out->set_expert_corrupt(c.experts.corrupt_experts);
  out->set_expert_manifest_mismatches(c.experts.manifest_mismatches);
  out->set_speculation_on(c.speculation.on);
  out->set_speculative_experts(c.speculation.posted);
  out->set_speculative_reads(c.experts.speculative_reads);
  out->set_speculative_bytes(c.experts.speculative_bytes);
  out->set_speculative_hits(c.experts.speculative_hits);
  out->set_speculation_recall_moe_input(c.speculation.recall(0));
  out->set_speculation_recall_layer_output(c.speculation.recall(1));
  out->set_expert_bytes(loop_->model().config().expert_bytes());
  out->set_experts_pruned(c.experts_pruned);
  // The hosts in use, in placement order, with their figures (none yet when
  // the expert source could not be made).
  for (const engined::RemoteHost& r : loop_->remote_hosts()) {
    v1::EngineStatsResponse::RemoteHost* o = out->add_remote_hosts();
    o->set_name(r.name);
    o->set_address(r.address);
    o->set_tls_ca(r.tls.ca);
    o->set_tls_cert(r.tls.cert);
    o->set_tls_key(r.tls.key);
    o->set_auth_token_file(r.token_file);
    o->set_insecure(r.insecure);
    RemoteHostStats h;
    h.error = "not connected yet";
    h.latency_buckets.assign(kRemoteLatencyBuckets, 0);
    for (const RemoteHostStats& x : c.remote_hosts)
      if (x.name == r.name && x.address == r.address) h = x;
    o->set_up(h.up);
    o->set_error(h.error);
    o->set_expert_requests(h.requests);
    o->set_steps(h.steps);
    o->set_bytes_sent(h.bytes_sent);
    o->set_bytes_received(h.bytes_received);
    o->set_failures(h.failures);
    uint64_t cumulative = 0;
    for (size_t i = 0; i + 1 < kRemoteLatencyBuckets; ++i) {
      o->add_latency_bounds(kRemoteLatencyBounds[i]);
      if (i < h.latency_buckets.size()) cumulative += h.latency_buckets[i];
      o->add_latency_buckets(cumulative);
    }
    o->set_latency_sum(h.latency_sum);
    o->set_latency_count(h.latency_count);
  }
  return grpc::Status::OK;
}

grpc::Status EngineServiceImpl::SetPlacement(grpc::ServerContext*, const v1::Placement* req,
                                             v1::PlacementAck* out) {
  std::vector<std::string> segs(req->expertd_segments().begin(), req->expertd_segments().end());
  std::vector<engined::RemoteHost> hosts;
  for (const v1::Placement::RemoteHost& r : req->remote_expertd()) {
    engined::RemoteHost h;
    h.name = r.name();
    h.address = r.address();
    h.tls.ca = r.tls_ca();
    h.tls.cert = r.tls_cert();
    h.tls.key = r.tls_key();
    h.token_file = r.auth_token_file();
    h.insecure = r.insecure();
    hosts.push_back(std::move(h));
  }
  Status s = loop_->set_placement(segs, hosts, req->version());
  if (!s.ok()) base::logger("engined")->warn("placement v{} refused: {}", req->version(), msg(s));
  out->set_version(loop_->placement_version());
  return rpc::to_grpc(s);
}

}  // namespace k3::engined
