#include "engined/experts/remote_wire.h"

#include <cstring>
#include <map>

namespace k3::engine {

namespace pb = k3serve::v1;

pb::ExpertStreamRequest encode_step_request(const ExpertShape& shape, const ExpertRequest& r,
                                            uint64_t step, const std::string& fingerprint,
                                            bool bytes_mode, const std::string& kernel_isa) {
  pb::ExpertStreamRequest p;
  p.set_step(step);
  p.set_model_fingerprint(fingerprint);
  p.set_layer(static_cast<uint32_t>(r.layer));
  if (bytes_mode) {
    p.set_mode(pb::EXPERT_MODE_BYTES);
    for (const ExpertWork& w : r.work) p.add_work()->set_expert(static_cast<uint32_t>(w.expert));
    return p;
  }
  p.set_mode(pb::EXPERT_MODE_COMPUTE);
  p.set_kernel_isa(kernel_isa);
  const ExpertActivations& a = *r.activations;
  p.set_int8(a.int8);
  // Only the rows of the tokens that chose experts here travel.
  std::map<int64_t, uint32_t> compact;
  for (const ExpertWork& w : r.work)
    for (int64_t t : w.rows) compact.emplace(t, 0);
  uint32_t n = 0;
  for (auto& [t, idx] : compact) idx = n++;
  const size_t lat = static_cast<size_t>(shape.latent);
  p.set_tokens(n);
  if (a.int8) {
    std::string* q = p.mutable_q();
    std::string* qs = p.mutable_q_scales();
    q->resize(n * lat);
    qs->resize(n * lat / 32 * sizeof(float));
    for (const auto& [t, idx] : compact) {
      std::memcpy(q->data() + idx * lat, a.q + t * lat, lat);
      std::memcpy(qs->data() + idx * lat / 32 * sizeof(float), a.q_scales + t * lat / 32,
                  lat / 32 * sizeof(float));
    }
  } else {
    std::string* f = p.mutable_f32();
    f->resize(n * lat * sizeof(float));
    for (const auto& [t, idx] : compact)
      std::memcpy(f->data() + idx * lat * sizeof(float), a.f32 + t * lat, lat * sizeof(float));
  }
  for (const ExpertWork& w : r.work) {
    pb::ExpertWorkItem* it = p.add_work();
    it->set_expert(static_cast<uint32_t>(w.expert));
    for (int64_t t : w.rows) it->add_rows(compact[t]);
  }
  return p;
}

StatusOr<std::vector<std::vector<uint8_t>>> check_describe(const pb::DescribeResponse& d,
                                                           const ExpertShape& shape,
                                                           const std::string& fingerprint,
                                                           const std::string& label) {
  if (d.model_fingerprint() != fingerprint)
    return absl::FailedPreconditionError(
        cat("remote expertd ", label, " serves another model (fingerprint ", d.model_fingerprint(),
            ", this engine's is ", fingerprint, "): refused"));
  if (d.expert_bytes() != shape.bytes)
    return absl::FailedPreconditionError(cat("remote expertd ", label, " has experts of ",
                                             d.expert_bytes(), " bytes, not ", shape.bytes));
  std::vector<std::vector<uint8_t>> owned(static_cast<size_t>(shape.num_layers));
  const size_t nbytes = static_cast<size_t>((shape.num_experts + 7) / 8);
  for (int i = 0; i < d.layers_size(); ++i) {
    const pb::ServedLayer& l = d.layers(i);
    if (l.layer() < shape.first_moe_layer || l.layer() >= owned.size())
      return absl::FailedPreconditionError(cat("remote expertd ", label, " describes layer ",
                                               l.layer(), " (field layers[", i,
                                               "].layer), not a MoE layer"));
    if (l.experts().size() != nbytes)
      return absl::FailedPreconditionError(cat(
          "remote expertd ", label, " describes layer ", l.layer(), " with ", l.experts().size(),
          " bytes of expert bitmap (field layers[", i, "].experts), not ", nbytes));
    if (!owned[l.layer()].empty())
      return absl::FailedPreconditionError(cat("remote expertd ", label, " describes layer ",
                                               l.layer(), " twice (field layers[", i, "])"));
    std::vector<uint8_t>& bits = owned[l.layer()];
    bits.assign(l.experts().begin(), l.experts().end());
    // Bits past the last expert are padding: cleared, so no lookup can
    // find an expert the model does not have.
    if (shape.num_experts % 8 != 0)
      bits.back() &= static_cast<uint8_t>((1u << (shape.num_experts % 8)) - 1);
    uint32_t n = 0;
    for (uint8_t b : bits) n += static_cast<uint32_t>(__builtin_popcount(b));
    if (n == 0 || n != l.expert_count())
      return absl::FailedPreconditionError(
          cat("remote expertd ", label, " describes layer ", l.layer(), " with ", l.expert_count(),
              " experts (field layers[", i, "].expert_count) but ", n, " in its bitmap"));
  }
  return owned;
}

void RemoteStepReplies::start(const ExpertShape& shape, const std::vector<ExpertWork>& work,
                              bool bytes_mode) {
  shape_ = shape;
  bytes_mode_ = bytes_mode;
  experts_.clear();
  row_counts_.clear();
  for (const ExpertWork& w : work) {
    experts_.push_back(w.expert);
    row_counts_.push_back(w.rows.size());
  }
  done_.assign(work.size(), false);
  partial_.assign(work.size(), {});
  left_ = work.size();
}

StatusOr<std::optional<RemoteResult>> RemoteStepReplies::take(const pb::ExpertStreamReply& r) {
  const size_t i = r.index();
  if (i >= done_.size() || done_[i])
    return absl::DataLossError(cat("reply for work ", i, " that is not due (field index)"));
  RemoteResult out;
  out.index = i;
  if (!bytes_mode_) {
    if (r.offset() != 0 || !r.data().empty() || r.total_bytes() != 0)
      return absl::DataLossError(cat("expert ", experts_[i],
                                     ": a compute reply carries bytes-mode fields (offset, "
                                     "data, total_bytes)"));
    const size_t want = row_counts_[i] * static_cast<size_t>(shape_.latent) * sizeof(float);
    if (r.rows().size() != want)
      return absl::DataLossError(cat("expert ", experts_[i], " came back with ", r.rows().size(),
                                     " bytes of rows (field rows), not ", want));
    out.rows.resize(want / sizeof(float));
    std::memcpy(out.rows.data(), r.rows().data(), want);
  } else {
    if (!r.rows().empty())
      return absl::DataLossError(
          cat("expert ", experts_[i], ": a bytes-mode reply carries computed rows (field rows)"));
    std::vector<uint8_t>& buf = partial_[i];
    if (r.total_bytes() != shape_.bytes || r.offset() != buf.size() || r.data().empty() ||
        r.data().size() > shape_.bytes - buf.size())
      return absl::DataLossError(cat("expert ", experts_[i], ": chunk at ", r.offset(), " of ",
                                     r.data().size(), " bytes (total ", r.total_bytes(),
                                     ") does not follow the ", buf.size(), " received of ",
                                     shape_.bytes, " (fields offset, data, total_bytes)"));
    buf.insert(buf.end(), r.data().begin(), r.data().end());
    if (buf.size() < shape_.bytes) return std::optional<RemoteResult>();
    out.bytes = std::move(buf);
    buf = {};
  }
  done_[i] = true;
  --left_;
  return std::optional<RemoteResult>(std::move(out));
}

}  // namespace k3::engine
