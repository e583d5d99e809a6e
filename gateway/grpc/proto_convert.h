// The gRPC API's messages (proto/k3serve/v1/gateway.proto) to and from the
// gateway's plain types. A ChatRequest becomes the same ChatCall the HTTP
// path builds (the `render` object render_chat reads), checked by the same
// rules (check_client_sampling, validate_stop). Thread-safe (no state).
#pragma once

#include "gateway/core/api_types.h"
#include "k3serve/v1/gateway.pb.h"
#include "shared/status.h"

namespace k3::gateway {

// InvalidArgument naming the field (e.g. "'tools_json' must be a JSON array")
// for a request the HTTP path would refuse too. Messages keep only their
// non-empty fields; tool_choice is "auto", "none", "required" or the JSON text
// of an object; temperature and top_p default to 1 when unset; `stream` is
// set (the Chat rpc always streams, and its ChatDone always has usage).
StatusOr<ChatCall> chat_call_from_proto(const k3serve::v1::ChatRequest& request);

// Exactly one of prompt and prompt_ids must be non-empty; max_tokens 0 means
// OpenAI's default for completions (16), as a missing field does over HTTP.
StatusOr<CompletionCall> completion_call_from_proto(const k3serve::v1::CompleteRequest& request);

// Counts saturate at 2^32-1 (the proto's uint32).
void usage_to_proto(const Usage& usage, k3serve::v1::Usage* out);
// A note as gateway.proto's Progress: `queued` while waiting (else 0), then
// engined's last report of the prompt's reading (eta_s negative: unknown).
void progress_to_proto(const ProgressNote& note, k3serve::v1::Progress* out);
void delta_to_proto(const OutputDelta& delta, k3serve::v1::ChatDelta* out);
// The delta's logprobs (none unless asked for).
void logprobs_to_proto(const OutputDelta& delta,
                       google::protobuf::RepeatedPtrField<k3serve::v1::OutputLogprob>* out);

}  // namespace k3::gateway
