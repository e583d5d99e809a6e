// Both ends of the remote expert protocol (proto/k3serve/v1/expert.proto,
// RemoteExpertService), each message encoded and checked in this one place.
//
// engined's end (engined/experts/remote_source.h): the step request it
// sends, and the checks on what the host sends back, its DescribeResponse
// and the ExpertStreamReply messages of a layer step. The host is
// untrusted: a reply for work that is not due, rows of the wrong size, a
// chunk that does not follow the previous one or a field of the other mode
// is refused (DATA_LOSS, naming the field), never used; a Describe of
// another model, expert size or malformed layers too (FAILED_PRECONDITION:
// the host is not used). On a refused reply the source drops the stream and
// fails the step UNAVAILABLE naming the host, as for a lost host.
//
// The host's end (expertd/remote_listener.h): the checks an
// ExpertStreamRequest from another host gets before anything is read or
// computed for it. The request is untrusted too: every field is checked
// against this host's model and what it serves, and a refusal names the
// field. A request that passes is computable as it stands: its experts are
// distinct, served and in range, every row index is inside the activations
// it carries, and those are exactly the bytes the named kernel reads
// (tests/fuzz/fuzz_remote_request.cpp holds the check to that).
//
// Pure: no I/O, no locks; RemoteStepReplies is not thread-safe (one per
// source, on the caller's thread); check_remote_request is thread-safe as
// long as `serves` is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "k3serve/v1/expert.pb.h"
#include "shared/experts/expert_source.h"
#include "shared/status.h"

namespace k3::experts {

// The message of one demand step of `r` (checked by check_request): in bytes
// mode the experts only; in compute mode the kernel variant `kernel_isa`
// and only the activation rows of the tokens that chose these experts,
// renumbered in token order (work rows index into them).
k3serve::v1::ExpertStreamRequest encode_step_request(const ExpertShape& shape,
                                                     const ExpertRequest& r, uint64_t step,
                                                     const std::string& fingerprint,
                                                     bool bytes_mode,
                                                     const std::string& kernel_isa);

// The activation rows a compute step of `r` sends: its distinct token rows
// (encode_step_request sends no others). A host receives a step of at most
// kMaxChunkTokens of them (max_remote_message_bytes); the engine fetches
// the experts' bytes instead for a step of more (a forward pass batching
// several prompts' pieces can reach it).
int64_t step_request_tokens(const ExpertRequest& r);

// Checks a host's Describe answer against this engine's model (`fingerprint`
// in hex, `shape`); the experts it serves, per layer: a bitmap of
// ceil(num_experts / 8) bytes (empty for a layer it serves nothing of).
// `label` names the host in errors.
StatusOr<std::vector<std::vector<uint8_t>>> check_describe(const k3serve::v1::DescribeResponse& d,
                                                           const ExpertShape& shape,
                                                           const std::string& fingerprint,
                                                           const std::string& label);

// One finished expert of a step: its output rows (computed there) or its
// complete raw bytes (bytes mode; computed here by the caller).
struct RemoteResult {
  size_t index = 0;            // into the request's work
  std::vector<float> rows;     // compute: {work[index].rows.size(), latent}
  std::vector<uint8_t> bytes;  // bytes mode: shape.bytes of them
};

// The replies of one layer step, as they arrive.
class RemoteStepReplies {
 public:
  // A new step: `work` as sent (its rows say what each compute reply must
  // hold), in bytes mode or not.
  void start(const ExpertShape& shape, const std::vector<ExpertWork>& work, bool bytes_mode);
  // Takes one reply of this step (the caller drops other steps' by number):
  // a result when it completes an expert, nullopt for a chunk of one still
  // incomplete; DATA_LOSS for a reply the step does not expect.
  StatusOr<std::optional<RemoteResult>> take(const k3serve::v1::ExpertStreamReply& r);
  // Experts of the step not yet complete.
  size_t left() const { return left_; }

 private:
  ExpertShape shape_;
  std::vector<int64_t> experts_;    // per work index (in messages)
  std::vector<size_t> row_counts_;  // per work index: rows a compute reply holds
  bool bytes_mode_ = false;
  std::vector<bool> done_;
  std::vector<std::vector<uint8_t>> partial_;  // bytes mode: per work index
  size_t left_ = 0;
};

// ---- The host's end ----

// Activation rows one request may carry.
inline constexpr uint32_t kMaxRemoteTokens = 1u << 20;

// engined's largest prefill chunk (--chunk, in tokens).
inline constexpr int64_t kMaxChunkTokens = 4096;

// The largest legitimate message of the protocol for a model, in bytes: a
// compute request for a pass of kMaxChunkTokens tokens, all of them sent
// (each routed to `experts_per_token` experts, all on this host), with float
// activations (the larger kernel: int8 takes 1.125 bytes per value, so an
// int8 pass of 3.5 chunks fits), its work lists and fixed fields. Every
// reply is smaller: a compute reply holds one expert's rows of those
// tokens, a bytes reply 1 MiB of data. At most INT32_MAX (gRPC's caps are
// ints). A host's receive cap (expertd/remote_listener.cpp).
uint64_t max_remote_message_bytes(const ExpertShape& shape, int64_t experts_per_token);

// What a request is checked against: this host's side of the protocol.
struct RemoteHostView {
  ExpertShape shape;        // of this host's model
  std::string fingerprint;  // DescribeResponse.model_fingerprint (hex)
  std::string kernel_isa;   // the variant this host computes with
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
  ExpertRequest engine_request;
  // Compute mode: the activations, {tokens, latent} (int8 q with scales
  // {tokens, latent / 32}, or f32).
  std::vector<int8_t> q;
  std::vector<float> q_scales, f32;
  ExpertActivations activations;

  // The request to submit to an ExpertSource; valid while this object lives
  // and is not moved.
  ExpertRequest request() const;
};

// Checks `req` (see the file comment); INVALID_ARGUMENT for a malformed
// field, FAILED_PRECONDITION for another model or kernel variant, NOT_FOUND
// for an expert this host does not serve.
StatusOr<CheckedRequest> check_remote_request(const k3serve::v1::ExpertStreamRequest& req,
                                              const RemoteHostView& host);

}  // namespace k3::experts
