#include "expertd/remote_request.h"

#include <cstring>
#include <unordered_set>

namespace k3::expertd {

namespace pb = k3serve::v1;

engine::ExpertRequest CheckedRequest::request() const {
  engine::ExpertRequest r = engine_request;
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
Status take_activations(const pb::ExpertStreamRequest& req, const engine::ExpertShape& shape,
                        CheckedRequest& out) {
  const uint64_t T = req.tokens(), lat = static_cast<uint64_t>(shape.latent);
  if (T == 0 || T > kMaxRemoteTokens)
    return absl::InvalidArgumentError(
        cat("field tokens: activation rows ", T, " outside [1, ", kMaxRemoteTokens, "]"));
  engine::ExpertActivations& act = out.activations;
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
  const engine::ExpertShape& shape = host.shape;
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
      out.engine_request.priority = engine::ExpertPriority::kSpeculative;
      break;
    default:
      return absl::InvalidArgumentError(
          cat("field mode: unknown expert mode ", static_cast<int>(req.mode())));
  }
  engine::ExpertRequest& r = out.engine_request;
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
    engine::ExpertWork wk;
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

}  // namespace k3::expertd
