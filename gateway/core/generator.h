// The gateway's generation core, shared by the OpenAI HTTP adapter and the
// gRPC adapter: a request is prepared (request_preparer.h: rendered in K3's
// XTML format and tokenized, checked), admitted, and run here by engined;
// each choice's generated ids are parsed back into reasoning, content and
// tool calls and streamed as deltas (choice_stream.h); stop strings, the
// request deadline, a stall (--progress-timeout-s) and the client going away
// end it early. While it has no delta to send, the client gets progress
// notes (engined's reading of the prompt, or a keep-alive) at least every
// GeneratorOptions::progress_interval_s.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gateway/core/admission.h"
#include "gateway/core/api_types.h"
#include "gateway/core/engine_client.h"
#include "gateway/core/gateway_metrics.h"
#include "gateway/core/request_preparer.h"
#include "shared/status.h"
#include "shared/tokenizer/tokenizer.h"

namespace k3::gateway {

// One request's identity and its link to the client.
struct RequestContext {
  std::string id;  // "chatcmpl-..." / "cmpl-..." (random_id.h)
  // The request's cap (--request-timeout-s, or the client's own deadline);
  // time_point::max() for none. Left unset, GatewayCore::serve sets it.
  std::chrono::steady_clock::time_point deadline;
  // Polled a few times a second while waiting: false = the client went away.
  std::function<bool()> alive;
  // A stream's: gets a ProgressNote (api_types.h) whenever the request has
  // nothing else to send, queued or running; false = the client went away.
  // Empty: no notes (a non-streamed answer).
  std::function<bool(const ProgressNote&)> on_progress;
  // A non-streamed answer: reaching `deadline` after the first token ends the
  // request with what it generated (GenerationResult::truncated_at_deadline)
  // instead of failing. A stream has sent its part already.
  bool keep_partial_at_deadline = false;
};

struct GenerationResult {
  // [n]: chat messages; for completions `content` holds the text.
  std::vector<ChoiceResult> choices;
  // The prompt once, completion tokens summed over the choices.
  Usage usage;
  // The deadline ended it (keep_partial_at_deadline): every choice it cut
  // reads finish_reason length.
  bool truncated_at_deadline = false;
};

// Thread-safe: requests run concurrently.
class Generator {
 public:
  Generator(tokenizer::Tokenizer tokenizer, EngineClient* engine, AdmissionQueue* admission,
            GatewayMetrics* metrics, GeneratorOptions options);

  const std::string& model_name() const { return preparer_.options().model_name; }
  const tokenizer::Tokenizer& tokenizer() const { return tok_; }
  void set_max_context(int64_t n) { preparer_.set_max_context(n); }
  int64_t max_context() const { return preparer_.max_context(); }

  // See RequestPreparer (request_preparer.h).
  StatusOr<PreparedRequest> prepare_chat(const ChatCall& call) const {
    return preparer_.prepare_chat(call);
  }
  StatusOr<PreparedRequest> prepare_completion(const CompletionCall& call) const {
    return preparer_.prepare_completion(call);
  }
  // NOT_FOUND unless `model` is empty or the served model's id.
  Status check_model(const std::string& model) const { return preparer_.check_model(model); }

  // Runs a prepared request holding `ticket`; `on_delta` gets each piece of
  // output as it is parsed, tagged with its choice (return false when the
  // client is gone: the request, every choice, is cancelled in engined).
  // With n > 1 the choices' deltas interleave as engined decodes them
  // together; a choice a stop string ends is done at once (engined goes on
  // decoding it until the request ends: the stream cannot stop one choice).
  // Only choice 0 is remembered as the conversation's continuation
  // (turn_record.h). The time since `ticket` was granted is the one
  // --progress-timeout-s measures (queueing does not count).
  StatusOr<GenerationResult> run(const PreparedRequest& req, Ticket ticket, RequestContext& ctx,
                                 const std::function<bool(const OutputDelta&)>& on_delta);

  // Shutting down: running requests end (UNAVAILABLE) at their next event.
  void stop() { stopping_.store(true); }

 private:
  // engined's request for `req`: `room` the tokens the context leaves.
  k3serve::v1::GenerateRequest engine_request(const PreparedRequest& req, const RequestContext& ctx,
                                              int64_t room) const;

  tokenizer::Tokenizer tok_;
  EngineClient* engine_;
  AdmissionQueue* admission_;
  GatewayMetrics* metrics_;
  RequestPreparer preparer_;  // after tok_: it reads it
  std::atomic<bool> stopping_{false};
};

}  // namespace k3::gateway
