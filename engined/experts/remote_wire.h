// engined's side of the remote expertd messages (proto/k3serve/v1/
// expert.proto), for its remote source (remote_source.h): the step request
// it sends, and the checks on what the host sends back, its
// DescribeResponse and the ExpertStreamReply messages of a layer step. The
// host is untrusted: a reply for work that is not due, rows of the wrong
// size, a chunk that does not follow the previous one or a field of the
// other mode is refused (DATA_LOSS, naming the field), never used; a
// Describe of another model, expert size or malformed layers too
// (FAILED_PRECONDITION: the host is not used). On a refused reply the source
// drops the stream and fails the step UNAVAILABLE naming the host, as for a
// lost host.
//
// Pure: no I/O; not thread-safe (one per source, on the caller's thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engined/experts/expert_source.h"
#include "k3serve/v1/expert.pb.h"
#include "shared/base/status.h"

namespace k3::engine {

// The message of one demand step of `r` (checked by check_request): in bytes
// mode the experts only; in compute mode the kernel variant `kernel_isa`
// and only the activation rows of the tokens that chose these experts,
// renumbered in token order (work rows index into them).
k3serve::v1::ExpertStreamRequest encode_step_request(const ExpertShape& shape,
                                                     const ExpertRequest& r, uint64_t step,
                                                     const std::string& fingerprint,
                                                     bool bytes_mode,
                                                     const std::string& kernel_isa);

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

}  // namespace k3::engine
