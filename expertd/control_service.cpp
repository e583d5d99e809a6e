#include "expertd/control_service.h"

#include <cstdio>

#include "expertd/remote_listener.h"
#include "expertd/segment_server.h"
#include "shared/base/cpu_features.h"
#include "shared/base/hash.h"
#include "shared/rpc/server.h"

namespace k3::expertd {

using k3::checkpoint::ModelConfig;

grpc::Status ControlService::Health(grpc::ServerContext*, const k3serve::v1::HealthRequest*,
                                    k3serve::v1::HealthResponse* out) {
  rpc::fill_health("expertd", out);
  return grpc::Status::OK;
}

grpc::Status ControlService::Describe(grpc::ServerContext*, const k3serve::v1::DescribeRequest*,
                                      k3serve::v1::DescribeResponse* out) {
  out->set_model_fingerprint(base::hex64(shards_.checkpoint().fingerprint()));
  const ModelConfig& c = shards_.config();
  for (int64_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l) {
    std::string bits(static_cast<size_t>((c.num_experts + 7) / 8), '\0');
    uint32_t n = 0;
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const bool served = server_ != nullptr ? server_->serves(l, e) : shards_.owns(l, e);
      if (!served) continue;
      bits[static_cast<size_t>(e / 8)] |= static_cast<char>(1u << (e % 8));
      ++n;
    }
    if (n == 0) continue;
    auto* layer = out->add_layers();
    layer->set_layer(static_cast<uint32_t>(l));
    layer->set_expert_count(n);
    layer->set_experts(bits);
  }
  out->set_expert_bytes(shards_.index().expert_bytes());
  for (const auto& d : shards_.dirs()) out->add_shard_dirs(d);
  if (server_ != nullptr) {
    out->set_segment(server_->segment_name());
    out->set_slot_count(server_->slot_count());
    out->set_slot_stride(server_->slot_stride());
    out->set_direct_io(server_->stats().direct);
  }
  out->set_kernel_isa(std::string(base::kernel_isa_name(base::kernel_isa())));
  if (remote_ != nullptr) {
    out->set_remote_listen(remote_->address());
    out->set_insecure_remote(remote_->insecure());
    if (remote_->insecure())
      out->set_warning(cat("the remote listener ", remote_->address(),
                           " is plaintext (--insecure-remote): activations and the token "
                           "travel unencrypted"));
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::Stats(grpc::ServerContext*, const k3serve::v1::StatsRequest*,
                                   k3serve::v1::StatsResponse* out) {
  if (server_ == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no data plane");
  const SegmentServerStats s = server_->stats();
  out->set_requests(s.requests);
  out->set_hits(s.hits);
  out->set_misses(s.misses);
  out->set_prefetches(s.prefetches);
  out->set_bytes_read(s.bytes_read);
  out->set_reads(s.reads);
  out->set_read_errors(s.read_errors);
  out->set_corrupt_experts(s.corrupt_experts);
  out->set_speculative_reads(s.speculative_reads);
  out->set_speculative_used(s.speculative_used);
  out->set_speculative_wasted(s.speculative_wasted);
  out->set_speculative_dropped(s.speculative_dropped);
  out->set_verified_reads(s.verified_reads);
  out->set_manifest_mismatches(s.manifest_mismatches);
  out->set_verify_seconds(s.verify_seconds);
  out->set_read_io_errors(s.io_errors);
  out->set_read_gbps(s.read_seconds > 0 ? s.bytes_read / s.read_seconds / 1e9 : 0.0);
  out->set_read_p50_ms(s.p50_ms);
  out->set_read_p99_ms(s.p99_ms);
  out->set_read_max_ms(s.max_ms);
  out->set_queue_depth(s.queue_depth);
  out->set_clients(s.clients);
  out->set_slots(s.slots);
  out->set_slots_pinned(s.slots_pinned);
  out->set_reclaimed_clients(s.reclaimed_clients);
  out->set_read_limit_waits(s.read_limit_waits);
  out->set_read_limit_wait_seconds(s.read_limit_wait_seconds);
  if (remote_ != nullptr) {
    const RemoteListenerStats r = remote_->stats();
    out->set_remote_streams(r.streams);
    out->set_remote_requests(r.requests);
    out->set_remote_replies(r.replies);
    out->set_remote_bytes_in(r.bytes_in);
    out->set_remote_bytes_out(r.bytes_out);
    out->set_remote_rows(r.rows);
    out->set_remote_bytes_experts(r.bytes_experts);
    out->set_remote_refused(r.refused);
  }
  return grpc::Status::OK;
}

}  // namespace k3::expertd
