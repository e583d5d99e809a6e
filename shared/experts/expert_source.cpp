#include "shared/experts/expert_source.h"

#include <chrono>
#include <unordered_set>

namespace k3::experts {

ExpertSourceStats& ExpertSourceStats::operator+=(const ExpertSourceStats& o) {
  requests += o.requests;
  hits += o.hits;
  reads += o.reads;
  bytes_read += o.bytes_read;
  speculative += o.speculative;
  speculative_reads += o.speculative_reads;
  speculative_bytes += o.speculative_bytes;
  speculative_hits += o.speculative_hits;
  wait_seconds += o.wait_seconds;
  compute_seconds += o.compute_seconds;
  corrupt_experts += o.corrupt_experts;
  manifest_mismatches += o.manifest_mismatches;
  verified_reads += o.verified_reads;
  verify_seconds += o.verify_seconds;
  network_bytes += o.network_bytes;
  remote_messages += o.remote_messages;
  reissued += o.reissued;
  return *this;
}

ExpertSourceStats operator-(const ExpertSourceStats& a, const ExpertSourceStats& b) {
  ExpertSourceStats d;
  d.requests = a.requests - b.requests;
  d.hits = a.hits - b.hits;
  d.reads = a.reads - b.reads;
  d.bytes_read = a.bytes_read - b.bytes_read;
  d.speculative = a.speculative - b.speculative;
  d.speculative_reads = a.speculative_reads - b.speculative_reads;
  d.speculative_bytes = a.speculative_bytes - b.speculative_bytes;
  d.speculative_hits = a.speculative_hits - b.speculative_hits;
  d.wait_seconds = a.wait_seconds - b.wait_seconds;
  d.compute_seconds = a.compute_seconds - b.compute_seconds;
  d.corrupt_experts = a.corrupt_experts - b.corrupt_experts;
  d.manifest_mismatches = a.manifest_mismatches - b.manifest_mismatches;
  d.verified_reads = a.verified_reads - b.verified_reads;
  d.verify_seconds = a.verify_seconds - b.verify_seconds;
  d.network_bytes = a.network_bytes - b.network_bytes;
  d.remote_messages = a.remote_messages - b.remote_messages;
  d.reissued = a.reissued - b.reissued;
  return d;
}

void RemoteHostStats::add_counters(const RemoteHostStats& o) {
  requests += o.requests;
  steps += o.steps;
  bytes_sent += o.bytes_sent;
  bytes_received += o.bytes_received;
  failures += o.failures;
  latency_buckets.resize(kRemoteLatencyBuckets, 0);
  for (size_t i = 0; i < o.latency_buckets.size() && i < kRemoteLatencyBuckets; ++i)
    latency_buckets[i] += o.latency_buckets[i];
  latency_sum += o.latency_sum;
  latency_count += o.latency_count;
}

StatusOr<ExpertCompletion> ExpertSource::next() {
  if (outstanding() == 0) return absl::FailedPreconditionError("no expert completion is due");
  for (;;) {
    K3_ASSIGN_OR_RETURN(std::optional<ExpertCompletion> c, poll(-1));
    if (c) return std::move(*c);
  }
}

Status fetch_bytes(ExpertSource& src, int64_t layer, const std::vector<int64_t>& ids,
                   const std::function<Status(size_t, const uint8_t*)>& on_ready) {
  ExpertRequest r;
  r.layer = layer;
  for (int64_t e : ids) r.work.push_back({e, false, {}});
  K3_RETURN_IF_ERROR(src.submit(r));
  for (size_t n = 0; n < ids.size(); ++n) {
    K3_ASSIGN_OR_RETURN(ExpertCompletion c, src.next());
    K3_RETURN_IF_ERROR(on_ready(c.index, c.bytes));
  }
  return absl::OkStatus();
}

ExpertCompletion complete_locally(const ExpertShape& shape, const ExpertRequest& r, size_t index,
                                  const uint8_t* bytes, ExpertSourceStats* stats,
                                  bool* bytes_used) {
  ExpertCompletion c;
  c.index = index;
  const ExpertWork& w = r.work[index];
  *bytes_used = !w.compute;
  if (!w.compute) {
    c.bytes = bytes;
    return c;
  }
  const auto t0 = std::chrono::steady_clock::now();
  c.rows.resize(w.rows.size() * static_cast<size_t>(shape.latent));
  compute_expert_rows(shape, bytes, *r.activations, w.rows, c.rows.data());
  stats->compute_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

Status check_request(const ExpertRequest& r, int64_t num_experts) {
  std::unordered_set<int64_t> seen;
  for (const ExpertWork& w : r.work) {
    if (w.expert < 0 || w.expert >= num_experts)
      return absl::InvalidArgumentError(
          cat("expert ", w.expert, " of layer ", r.layer, " is outside [0, ", num_experts, ")"));
    if (!seen.insert(w.expert).second)
      return absl::InvalidArgumentError(
          cat("expert ", w.expert, " of layer ", r.layer, " is asked for twice"));
    if (!w.compute) continue;
    if (r.priority == ExpertPriority::kSpeculative)
      return absl::InvalidArgumentError("a speculative request cannot compute rows");
    if (r.activations == nullptr)
      return absl::InvalidArgumentError("compute work without activations");
    for (int64_t t : w.rows)
      if (t < 0 || t >= r.activations->tokens)
        return absl::InvalidArgumentError(
            cat("token row ", t, " is outside the ", r.activations->tokens, " activation rows"));
  }
  return absl::OkStatus();
}

}  // namespace k3::experts
