// A request made ready to run: a chat rendered in K3's XTML format and
// tokenized message by message (an earlier turn's ids put back where the
// conversation continues, turn_record.h), a completion's prompt tokenized or
// checked; the model, the length limits and the sampling checked and resolved
// over the defaults (sampling_defaults.h); the output form engined enforces
// (output_form_request.h). The finished turns it remembers are what lets the
// next turn continue engined's session.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/core/api_types.h"
#include "gateway/core/gateway_metrics.h"
#include "gateway/core/sampling_defaults.h"
#include "gateway/core/turn_record.h"
#include "k3serve/v1/engine.pb.h"
#include "shared/checkpoint/stop_tokens.h"
#include "shared/status.h"
#include "shared/tokenizer/tokenizer.h"

namespace k3::gateway {

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
  std::optional<uint64_t> seed;          // the client's; unset: drawn by Generator::run
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

// The served model and its limits (the run loop reads max_tokens_limit too).
struct GeneratorOptions {
  std::string model_name;
  std::vector<std::string> model_aliases;  // other ids requests may name (--served-model-name)
  int64_t max_context = 0;                 // engined's (0 until known)
  int64_t max_prompt_tokens = 0;           // 0 = the context
  SamplingDefaults sampling;               // generation_config.json's
  int64_t max_tokens_limit = 0;  // most tokens generated per request (0 = the context's room)
  // The model's stop tokens (checkpoint/stop_tokens.h): every reply, chat or
  // completion, ends at the first it generates.
  checkpoint::StopTokens stops;
  // The run loop's (generator.h): a running request that gets no event from
  // engined for this long fails (--progress-timeout-s; 0 = never) ...
  double progress_timeout_s = 300;
  // ... and a client with nothing else to send gets a ProgressNote at least
  // this often (docs/openai-api.md: 5 s; tests shorten it).
  double progress_interval_s = 5;
};

// Thread-safe: requests are prepared concurrently (the turn record locks
// itself; max_context is atomic).
class RequestPreparer {
 public:
  // `tokenizer` and `metrics` (may be null) outlive the preparer.
  RequestPreparer(const tokenizer::Tokenizer& tokenizer, GatewayMetrics* metrics,
                  GeneratorOptions options);

  const GeneratorOptions& options() const { return opt_; }
  void set_max_context(int64_t n) { max_context_.store(n); }
  int64_t max_context() const { return max_context_.load(); }

  // NOT_FOUND for another model; INVALID_ARGUMENT for a request the chat
  // format refuses; OUT_OF_RANGE (context) or 413 (prompt limit) for prompts
  // too long; INVALID_ARGUMENT naming 'max_tokens' when the context leaves
  // no room for it.
  StatusOr<PreparedRequest> prepare_chat(const ChatCall& call) const;
  StatusOr<PreparedRequest> prepare_completion(const CompletionCall& call) const;

  // NOT_FOUND unless `model` is empty or the served model's id.
  Status check_model(const std::string& model) const;
  // 413 over --max-prompt-tokens; OUT_OF_RANGE when the context leaves no
  // room to generate.
  Status check_length(int64_t prompt_tokens) const;

  // A finished chat turn (the ids it generated, the message parsed from
  // them) remembered for the conversation's next request (turn_record.h):
  // only a turn that ended at a stop token. Its history is rendered with
  // <|end_of_msg|> closing the reply, as the reference renders it, whichever
  // stop token ([EOS], say) ended it.
  void remember_turn(const PreparedRequest& req, const std::vector<int32_t>& generated,
                     const OutputMessage& message) const;

 private:
  struct EncodedChat {
    std::vector<int32_t> ids;
    std::vector<uint32_t> message_starts;  // but the first's (0)
  };
  StatusOr<EncodedChat> encode_chat(const nlohmann::ordered_json& render) const;
  // The client's sampling over the defaults into `p`; INVALID_ARGUMENT naming
  // 'logit_bias' for an id outside the vocabulary.
  Status set_sampling(const SamplingOptions& sampling, PreparedRequest& p) const;
  // INVALID_ARGUMENT naming 'max_tokens' when the context cannot hold it.
  Status check_max_tokens(int64_t prompt_tokens, int64_t max_tokens) const;

  const tokenizer::Tokenizer& tok_;
  GatewayMetrics* metrics_;
  GeneratorOptions opt_;
  std::atomic<int64_t> max_context_{0};
  std::optional<int32_t> end_of_msg_;  // the rendered history closes a reply with it
  mutable TurnRecord turns_;
};

}  // namespace k3::gateway
