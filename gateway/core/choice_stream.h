// One choice of a running request: the generated ids parsed back (chat:
// reasoning, content and tool calls; completions: text), stop strings matched
// on the visible text, logprobs gathered, the message built so far, and each
// step handed to the client as a delta. The run loop (generator.h) feeds it
// engined's events for this choice.
//
// Not thread-safe: its request's run loop drives it from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gateway/core/api_types.h"
#include "gateway/core/request_preparer.h"
#include "gateway/core/stop_matcher.h"
#include "k3serve/v1/engine.pb.h"
#include "shared/chat/xtml_tokens.h"
#include "shared/status.h"
#include "shared/tokenizer/tokenizer.h"

namespace k3::gateway {

// Gets each delta; false when the client is gone.
using DeltaSink = std::function<bool(const OutputDelta&)>;

class ChoiceStream {
 public:
  // Choice `index` of `req`; `req` and `tokenizer` outlive it.
  static StatusOr<ChoiceStream> create(int index, const PreparedRequest& req,
                                       const tokenizer::Tokenizer& tokenizer);

  int index() const { return index_; }
  // Over: ended by a stop string or by engined (what engined still decodes
  // for it after a stop string goes unseen).
  bool done() const { return done_; }
  // A stop string ended it (or is about to: see finish).
  bool stopped() const { return stopped_; }
  // engined sent its finished event.
  bool engine_finished() const { return engine_finished_; }

  // completions with echo: the prompt first, outside stop-string matching.
  // False when the client is gone.
  bool echo_prompt(const DeltaSink& on_delta);
  // One generated id and, when the request asked for them, its logprobs:
  // parsed, stop strings applied, handed to the client. False when the
  // client is gone; an error when the id cannot be parsed.
  StatusOr<bool> feed(int32_t id, const k3serve::v1::GenerateLogprobs* logprobs,
                      const DeltaSink& on_delta);
  // The choice is over (engined finished it for `reason`, or STOP for a stop
  // string): what the model left open closed, held-back text released, the
  // client told how it ended. False when the client is gone.
  bool finish(k3serve::v1::GenerateFinished::Reason reason, const DeltaSink& on_delta);
  // engined's finished event for this choice: finishes it unless a stop
  // string did already. False when the client is gone.
  bool on_engine_finished(k3serve::v1::GenerateFinished::Reason reason, const DeltaSink& on_delta);

  const std::vector<int32_t>& generated_ids() const { return generated_ids_; }
  const ChoiceResult& result() const { return out_; }
  ChoiceResult take_result() { return std::move(out_); }

 private:
  ChoiceStream(int index, const PreparedRequest& req, const tokenizer::Tokenizer& tokenizer);
  // Applies one parsed step: stop strings on the visible `text`, ids on new
  // tool calls; hands it to the client. False when the client is gone.
  bool emit(const chat::ChatDelta& cd, std::string text, std::optional<LogprobEntry> lp,
            const DeltaSink& on_delta);
  TokenLogprob token_logprob(int32_t id, float logprob) const;

  int index_;
  const PreparedRequest* req_;
  const tokenizer::Tokenizer* tok_;
  std::optional<chat::OutputTokenParser> parser_;    // chat
  std::optional<tokenizer::StreamDecoder> decoder_;  // completions
  StopMatcher stop_;
  ChoiceResult out_;
  std::vector<std::string> call_ids_;
  std::vector<int32_t> generated_ids_;
  int64_t text_offset_ = 0;
  bool stopped_ = false;  // by a stop string
  bool done_ = false;     // by a stop string or engined's finished event
  bool engine_finished_ = false;
};

}  // namespace k3::gateway
