#include "shared/experts/remote_protocol.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <unordered_set>

namespace k3::experts {

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

int64_t step_request_tokens(const ExpertRequest& r) {
  int64_t end = 0;  // one past the highest row
  for (const ExpertWork& w : r.work)
    for (int64_t t : w.rows) end = std::max(end, t + 1);
  std::vector<bool> seen(static_cast<size_t>(end), false);
  int64_t n = 0;
  for (const ExpertWork& w : r.work)
    for (int64_t t : w.rows)
      if (t >= 0 && !seen[static_cast<size_t>(t)]) seen[static_cast<size_t>(t)] = true, ++n;
  return n;
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
    // (No rows: an empty vector's data() may be null, and memcpy from or to
    // null is undefined even for 0 bytes.)
    if (want > 0) std::memcpy(out.rows.data(), r.rows().data(), want);
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

// ---- The host's end ----

ExpertRequest CheckedRequest::request() const {
  ExpertRequest r = engine_request;
  if (mode == pb::EXPERT_MODE_COMPUTE) r.activations = &activations;
  return r;
}

namespace {

// The activation fields of a compute request: refused in the other modes
// (nothing is accepted and ignored).
Status no_activations(const pb::ExpertStreamRequest& req, const char* mode) {
  const char* field = !req.kernel_isa().empty() ? "kernel_isa"
                      : req.int8()              ? "int8"
                      : req.tokens() != 0       ? "tokens"
                      : !req.q().empty()        ? "q"
                      : !req.q_scales().empty() ? "q_scales"
                      : !req.f32().empty()      ? "f32"
                                                : nullptr;
  if (field == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(
      cat("field ", field, " is set in ", mode, " mode (only compute mode takes activations)"));
}

// Copies the activation bytes of a compute request after checking their
// sizes against `tokens` and the kernel.
Status take_activations(const pb::ExpertStreamRequest& req, const ExpertShape& shape,
                        CheckedRequest& out) {
  const uint64_t T = req.tokens(), lat = static_cast<uint64_t>(shape.latent);
  if (T == 0 || T > kMaxRemoteTokens)
    return absl::InvalidArgumentError(
        cat("field tokens: activation rows ", T, " outside [1, ", kMaxRemoteTokens, "]"));
  ExpertActivations& act = out.activations;
  act.tokens = static_cast<int64_t>(T);
  act.int8 = req.int8();
  if (req.int8()) {
    if (lat % 32 != 0)
      return absl::FailedPreconditionError(
          cat("field int8: the int8 kernel needs a latent size divisible by 32, not ", lat));
    if (!req.f32().empty())
      return absl::InvalidArgumentError("field f32 is set for the int8 kernel (it takes q)");
    if (req.q().size() != T * lat)
      return absl::InvalidArgumentError(cat("field q: int8 activations of ", T, " rows must be ",
                                            T * lat, " bytes, not ", req.q().size()));
    if (req.q_scales().size() != T * lat / 32 * sizeof(float))
      return absl::InvalidArgumentError(cat("field q_scales: ", T, " rows take ",
                                            T * lat / 32 * sizeof(float), " bytes of scales, not ",
                                            req.q_scales().size()));
    out.q.resize(T * lat);
    out.q_scales.resize(T * lat / 32);
    std::memcpy(out.q.data(), req.q().data(), out.q.size());
    std::memcpy(out.q_scales.data(), req.q_scales().data(), out.q_scales.size() * sizeof(float));
    act.q = out.q.data();
    act.q_scales = out.q_scales.data();
  } else {
    if (!req.q().empty() || !req.q_scales().empty())
      return absl::InvalidArgumentError(cat("field ", req.q().empty() ? "q_scales" : "q",
                                            " is set for the float kernel (it takes f32)"));
    if (req.f32().size() != T * lat * sizeof(float))
      return absl::InvalidArgumentError(cat("field f32: float activations of ", T, " rows must be ",
                                            T * lat * sizeof(float), " bytes, not ",
                                            req.f32().size()));
    out.f32.resize(T * lat);
    std::memcpy(out.f32.data(), req.f32().data(), out.f32.size() * sizeof(float));
    act.f32 = out.f32.data();
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<CheckedRequest> check_remote_request(const pb::ExpertStreamRequest& req,
                                              const RemoteHostView& host) {
  const ExpertShape& shape = host.shape;
  if (req.model_fingerprint() != host.fingerprint)
    return absl::FailedPreconditionError(
        cat("this expertd serves model ", host.fingerprint, ", the request is for model ",
            req.model_fingerprint().empty() ? "(none named)" : req.model_fingerprint(),
            " (field model_fingerprint)"));
  const int64_t layer = req.layer();
  if (layer < shape.first_moe_layer || layer >= shape.num_layers)
    return absl::InvalidArgumentError(cat("field layer: layer ", layer, " is not a MoE layer (",
                                          shape.first_moe_layer, " to ", shape.num_layers - 1,
                                          ")"));
  CheckedRequest out;
  out.step = req.step();
  out.mode = req.mode();
  const bool compute = req.mode() == pb::EXPERT_MODE_COMPUTE;
  switch (req.mode()) {
    case pb::EXPERT_MODE_COMPUTE: {
      if (req.kernel_isa() != host.kernel_isa)
        return absl::FailedPreconditionError(
            cat("kernel variant mismatch: this expertd computes with the ", host.kernel_isa,
                " kernels, the request asks for '", req.kernel_isa(),
                "' (field kernel_isa; run both ends with the same K3_KERNELS for bit-identical "
                "results)"));
      K3_RETURN_IF_ERROR(take_activations(req, shape, out));
      break;
    }
    case pb::EXPERT_MODE_BYTES:
      K3_RETURN_IF_ERROR(no_activations(req, "bytes"));
      break;
    case pb::EXPERT_MODE_PREFETCH:
      K3_RETURN_IF_ERROR(no_activations(req, "prefetch"));
      out.engine_request.priority = ExpertPriority::kSpeculative;
      break;
    default:
      return absl::InvalidArgumentError(
          cat("field mode: unknown expert mode ", static_cast<int>(req.mode())));
  }
  ExpertRequest& r = out.engine_request;
  r.layer = layer;
  std::unordered_set<uint32_t> experts;
  for (int i = 0; i < req.work_size(); ++i) {
    const pb::ExpertWorkItem& w = req.work(i);
    if (w.expert() >= shape.num_experts)
      return absl::InvalidArgumentError(cat("field work[", i, "].expert: expert ", w.expert(),
                                            " is outside [0, ", shape.num_experts, ")"));
    if (!experts.insert(w.expert()).second)
      return absl::InvalidArgumentError(
          cat("field work[", i, "].expert: expert ", w.expert(), " is asked for twice"));
    if (!host.serves(layer, w.expert()))
      return absl::NotFoundError(
          cat("this expertd does not serve expert ", w.expert(), " of layer ", layer));
    if (!compute && w.rows_size() != 0)
      return absl::InvalidArgumentError(
          cat("field work[", i, "].rows: token rows given outside compute mode"));
    ExpertWork wk;
    wk.expert = w.expert();
    wk.compute = compute;
    // Distinct rows inside the activations: a work item never asks for more
    // rows than the request carries, so no reply outgrows its request.
    std::unordered_set<uint32_t> rows;
    for (int j = 0; j < w.rows_size(); ++j) {
      const uint32_t t = w.rows(j);
      if (t >= req.tokens())
        return absl::InvalidArgumentError(cat("field work[", i, "].rows[", j, "]: row ", t,
                                              " is outside the ", req.tokens(),
                                              " activation rows"));
      if (!rows.insert(t).second)
        return absl::InvalidArgumentError(
            cat("field work[", i, "].rows[", j, "]: row ", t, " is given twice"));
    }
    wk.rows.assign(w.rows().begin(), w.rows().end());
    r.work.push_back(std::move(wk));
  }
  return out;
}

uint64_t max_remote_message_bytes(const ExpertShape& shape, int64_t experts_per_token) {
  const uint64_t T = static_cast<uint64_t>(kMaxChunkTokens);
  const uint64_t lat = static_cast<uint64_t>(std::max<int64_t>(shape.latent, 0));
  const uint64_t k = static_cast<uint64_t>(std::max<int64_t>(experts_per_token, 1));
  const uint64_t experts = static_cast<uint64_t>(std::max<int64_t>(shape.num_experts, 1));
  // Packed varints of at most 5 bytes per row index; per work item its tag,
  // length, expert and the rows' tag and length (6 bytes each at most); the
  // scalar and string fields and the frame header within 1 KiB.
  const uint64_t request = T * lat * sizeof(float) + T * k * 5 + experts * 18 + 1024;
  const uint64_t bytes_reply = (1u << 20) + 1024;
  return std::min<uint64_t>(std::max(request, bytes_reply), INT32_MAX);
}

}  // namespace k3::experts
