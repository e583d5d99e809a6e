// What a request to engined's loop carries (ServeRequest), what it hears back
// (ServeEvent), and the handle both sides share (RequestHandle): an event
// queue the loop fills and the caller drains, and the caller's cancel flag.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engined/model/model.h"
#include "engined/sampler.h"
#include "engined/serving/session_pool.h"
#include "shared/grammar/token_constraint.h"
#include "shared/status.h"

namespace k3::engined {

struct ServeRequest {
  std::string request_id;
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;              // besides the model's stop tokens
  std::vector<int64_t> checkpoint_positions;  // prompt positions worth a checkpoint
  int session_hint = -1;
  bool logprobs = false;  // report each token's log-probability (token_logprobs)
  int top_logprobs = 0;   // and the this many most likely (at most api::kMaxTopLogprobs)
  // Routed-expert top-p for this request (EngineOptions::expert_top_p);
  // 0 = the engine's. Sessions and checkpoints are keyed on it.
  float expert_top_p = 0.0f;
  // Constrained decoding (null: none): only the tokens it allows are
  // sampled, and the request stops where its grammar is complete.
  std::shared_ptr<const grammar::Constraint> constraint;
  // With a constraint whose grammar opens with the think channel: at most
  // this many thinking tokens, then its closing is forced (think_budget.h);
  // 0: no limit.
  int64_t think_budget = 0;
  // The constraint covers the think channel only (think_channel_grammar():
  // a think budget with nothing else to enforce): once it is complete the
  // reply goes on unconstrained instead of stopping.
  bool constraint_think_only = false;
  // Choices (OpenAI's n): the prompt is prefilled once, then the sequence
  // state is copied into one session per choice; choice i samples with seed
  // + i and stops on its own (stop ids, max_tokens, constraint). In [1,
  // api::kMaxChoices] and at most the engine's sessions; the request waits until
  // that many sessions are free.
  int n = 1;
};

enum class StopReason { kStop, kLength };

// A request's events: one kStarted; when it has prompt tokens to compute
// (prefill_tokens > 0), kProgress events: one with done = 0 before the first
// prefill piece is computed, then one after each piece computed, the last
// with done == total (once, however many choices); then each choice's kToken
// events (choices interleaved) and one kFinished per choice; or one kFailed
// at any point, which ends every choice.
struct ServeEvent {
  enum class Kind { kStarted, kToken, kFinished, kFailed, kProgress };
  Kind kind = Kind::kToken;
  int choice = 0;    // kToken, kFinished: which choice (0 when n = 1)
  SessionPlan plan;  // kStarted
  int64_t prefill_tokens = 0;
  int32_t token = 0;                      // kToken
  std::optional<TokenLogprobs> logprobs;  // kToken, when asked for
  // kFinished
  StopReason reason = StopReason::kStop;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  Status status;  // kFailed
  // kProgress: prompt tokens computed so far, of the `total` this request
  // computes (kStarted's prefill_tokens), and the seconds the rest should
  // take at engined's measured prefill rate (prefill_rate.h): 0 when done ==
  // total, negative while engined has measured no rate yet.
  int64_t done = 0, total = 0;
  double eta_s = -1;
};

// Shared by the engine loop (producer) and the caller (consumer). Thread-safe.
class RequestHandle {
 public:
  // Asks the loop to stop the request. The loop looks before each step, so at
  // most the step in flight completes: one token, or one prefill piece (up
  // to the engine's chunk of prompt tokens) whose state the session keeps.
  // A request running alone is also stopped between the layers of that
  // step, its half-computed piece dropped with the session's state (the
  // prefill snapshots it already saved are kept).
  void cancel() { cancel_.store(true); }
  // Waits up to `timeout_ms` for the next event.
  bool next(ServeEvent* out, int timeout_ms);

 private:
  friend class EngineLoop;
  void push(ServeEvent e);
  std::atomic<bool> cancel_{false};
  // Set by the first choice that fails (or is cancelled): its kFailed is
  // the request's only one; the other choices then leave silently.
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ServeEvent> events_;
};

// Checks a request against the model and the loop's `sessions`, and fills
// its defaults (top_p 0 as 1, expert_top_p 0 as the model's): an error names
// the field at fault (INVALID_ARGUMENT, or OUT_OF_RANGE for a prompt that
// fills the context).
Status check_request(const Model& model, int sessions, ServeRequest* request);

}  // namespace k3::engined
