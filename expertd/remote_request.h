// The checks an ExpertStreamRequest from another host gets before anything
// is read or computed for it (proto/k3serve/v1/expert.proto,
// RemoteExpertService.Experts). The request is untrusted: every field is
// checked against this host's model and what it serves, and a refusal names
// the field. A request that passes is computable as it stands: its experts
// are distinct, served and in range, every row index is inside the
// activations it carries, and those are exactly the bytes the named kernel
// reads (tests/fuzz/fuzz_remote_request.cpp holds the check to that).
//
// Pure: no I/O, no locks; thread-safe as long as `serves` is.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engined/experts/expert_source.h"
#include "k3serve/v1/expert.pb.h"
#include "shared/base/status.h"

namespace k3::expertd {

// Activation rows one request may carry.
inline constexpr uint32_t kMaxRemoteTokens = 1u << 20;

// What a request is checked against: this host's side of the protocol.
struct RemoteHostView {
  engine::ExpertShape shape;  // of this host's model
  std::string fingerprint;    // DescribeResponse.model_fingerprint (hex)
  std::string kernel_isa;     // the variant this host computes with
  // Whether this host serves expert `expert` of `layer` (owned and in range).
  std::function<bool(int64_t layer, int64_t expert)> serves;
};

// A request that passed: the engine's form of it, with the activations
// copied into aligned buffers (protobuf's bytes promise no alignment).
// Move-only: `activations` points into the buffers, which a move keeps.
class CheckedRequest {
 public:
  CheckedRequest() = default;
  CheckedRequest(CheckedRequest&&) = default;
  CheckedRequest& operator=(CheckedRequest&&) = default;
  CheckedRequest(const CheckedRequest&) = delete;
  CheckedRequest& operator=(const CheckedRequest&) = delete;

  uint64_t step = 0;
  k3serve::v1::ExpertMode mode = k3serve::v1::EXPERT_MODE_UNSPECIFIED;
  // The engine's request: layer, work (compute set in compute mode) and
  // priority (speculative for prefetch); its activations pointer is left
  // null here, request() sets it.
  engine::ExpertRequest engine_request;
  // Compute mode: the activations, {tokens, latent} (int8 q with scales
  // {tokens, latent / 32}, or f32).
  std::vector<int8_t> q;
  std::vector<float> q_scales, f32;
  engine::ExpertActivations activations;

  // The request to submit to an ExpertSource; valid while this object lives
  // and is not moved.
  engine::ExpertRequest request() const;
};

// Checks `req` (see the file comment); INVALID_ARGUMENT for a malformed
// field, FAILED_PRECONDITION for another model or kernel variant, NOT_FOUND
// for an expert this host does not serve.
StatusOr<CheckedRequest> check_remote_request(const k3serve::v1::ExpertStreamRequest& req,
                                              const RemoteHostView& host);

}  // namespace k3::expertd
