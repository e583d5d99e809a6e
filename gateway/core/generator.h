// The gateway's generation core, shared by the OpenAI HTTP adapter and the
// gRPC adapter: a chat request is rendered in K3's XTML format and tokenized,
// admitted, run by engined, and the generated ids are parsed back into
// reasoning, content and tool calls, streamed as deltas; stop strings, the
// request deadline and the client going away end it early.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gateway/core/admission.h"
#include "gateway/core/api_types.h"
#include "gateway/core/engine_client.h"
#include "gateway/core/gateway_metrics.h"
#include "gateway/core/sampling_defaults.h"
#include "gateway/core/turn_record.h"
#include "shared/base/status.h"
#include "shared/chat/xtml_tokens.h"
#include "shared/tokenizer/tokenizer.h"

namespace k3::gateway {

// One request's identity and its link to the client.
struct RequestContext {
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  std::chrono::steady_clock::time_point deadline;
  // Polled a few times a second while waiting: false = the client went away.
  std::function<bool()> alive;
};

// A request ready to run: prompt ids and how to turn output ids into text.
struct PreparedRequest {
  bool chat = false;
  bool thinking = true;  // chat: the generation prompt opened the think channel
  std::vector<int32_t> prompt_ids;
  std::vector<uint32_t> checkpoint_positions;  // message starts and the prompt end
  std::string prompt_text;                     // completions with echo
  nlohmann::ordered_json render;               // chat: the request, to remember the turn
  int64_t max_tokens = 0;
  k3serve::v1::SamplingParams sampling;  // resolved (sampling_defaults.h), seed aside
  std::optional<uint64_t> seed;          // the client's; unset: drawn by run()
  std::optional<float> expert_top_p;     // k3_expert_top_p; unset: engined's
  bool logprobs = false;
  int top_logprobs = 0;
  bool tokens_as_ids = false;
  std::vector<std::string> stop;
  std::string model;
  // chat: the output form engined enforces (response_format, tool_choice).
  std::optional<k3serve::v1::OutputConstraint> constraint;
  int n = 1;  // choices
};

struct GenerationResult {
  // [n]: chat messages; for completions `content` holds the text.
  std::vector<ChoiceResult> choices;
  // The prompt once, completion tokens summed over the choices.
  Usage usage;
};

struct GeneratorOptions {
  std::string model_name;
  int64_t max_context = 0;        // engined's (0 until known)
  int64_t max_prompt_tokens = 0;  // 0 = the context
  SamplingDefaults sampling;      // generation_config.json's
  int64_t max_tokens_limit = 0;   // most tokens generated per request (0 = the context's room)
};

// Thread-safe: requests run concurrently.
class Generator {
 public:
  Generator(tokenizer::Tokenizer tokenizer, EngineClient* engine, AdmissionQueue* admission,
            GatewayMetrics* metrics, GeneratorOptions options);

  const std::string& model_name() const { return opt_.model_name; }
  const tokenizer::Tokenizer& tokenizer() const { return tok_; }
  void set_max_context(int64_t n);
  int64_t max_context() const;

  // NOT_FOUND for another model; INVALID_ARGUMENT for a request the chat
  // format refuses; OUT_OF_RANGE (context) or 413 (prompt limit) for prompts
  // too long; INVALID_ARGUMENT naming 'max_tokens' when the context leaves
  // no room for it.
  StatusOr<PreparedRequest> prepare_chat(const ChatCall& call) const;
  StatusOr<PreparedRequest> prepare_completion(const CompletionCall& call) const;

  // Runs a prepared request holding `ticket`; `on_delta` gets each piece of
  // output as it is parsed, tagged with its choice (return false when the
  // client is gone: the request, every choice, is cancelled in engined).
  // With n > 1 the choices' deltas interleave as engined decodes them
  // together; a choice a stop string ends is done at once (engined goes on
  // decoding it until the request ends: the stream cannot stop one choice).
  // Only choice 0 is remembered as the conversation's continuation
  // (turn_record.h).
  StatusOr<GenerationResult> run(const PreparedRequest& req, Ticket ticket, RequestContext& ctx,
                                 const std::function<bool(const OutputDelta&)>& on_delta);

  // Shutting down: running requests end (UNAVAILABLE) at their next event.
  void stop() { stopping_.store(true); }

  // NOT_FOUND unless `model` is empty or the served model's id.
  Status check_model(const std::string& model) const;

  // A fresh request id with this prefix ("chatcmpl-", "cmpl-").
  static std::string new_id(std::string_view prefix);

 private:
  struct EncodedChat {
    std::vector<int32_t> ids;
    std::vector<uint32_t> message_starts;  // but the first's (0)
  };
  StatusOr<EncodedChat> encode_chat(const nlohmann::ordered_json& render) const;
  struct ChoiceRun;
  // Applies one parsed step of choice `c`: stop strings on the visible text,
  // ids on new tool calls; hands it to the client. False when the client is
  // gone.
  bool emit(const PreparedRequest& req, ChoiceRun& c, const chat::ChatDelta& cd, std::string text,
            std::optional<LogprobEntry> lp,
            const std::function<bool(const OutputDelta&)>& on_delta) const;
  // A finished chat turn into turns_ (see turn_record.h).
  void remember_turn(const PreparedRequest& req, const std::vector<int32_t>& generated,
                     const OutputMessage& message) const;
  Status check_length(int64_t prompt_tokens) const;
  TokenLogprob token_logprob(int32_t id, float logprob, bool as_id) const;
  // The client's sampling over the defaults into `p`; INVALID_ARGUMENT naming
  // 'logit_bias' for an id outside the vocabulary.
  Status set_sampling(const SamplingOptions& sampling, PreparedRequest& p) const;
  // INVALID_ARGUMENT naming 'max_tokens' when the context cannot hold it.
  Status check_max_tokens(int64_t prompt_tokens, int64_t max_tokens) const;

  tokenizer::Tokenizer tok_;
  EngineClient* engine_;
  AdmissionQueue* admission_;
  GatewayMetrics* metrics_;
  GeneratorOptions opt_;
  std::atomic<int64_t> max_context_{0};
  std::atomic<bool> stopping_{false};
  std::optional<int32_t> end_of_msg_;  // chat replies end at this token
  mutable TurnRecord turns_;
};

}  // namespace k3::gateway
