#include "gateway/core/choice_stream.h"

#include <utility>

#include "gateway/core/random_id.h"

namespace k3::gateway {

namespace v1 = k3serve::v1;

ChoiceStream::ChoiceStream(int index, const PreparedRequest& req,
                           const tokenizer::Tokenizer& tokenizer)
    : index_(index), req_(&req), tok_(&tokenizer), stop_(req.stop) {}

StatusOr<ChoiceStream> ChoiceStream::create(int index, const PreparedRequest& req,
                                            const tokenizer::Tokenizer& tokenizer) {
  ChoiceStream c(index, req, tokenizer);
  if (req.chat) {
    K3_ASSIGN_OR_RETURN(auto p, chat::OutputTokenParser::create(tokenizer, req.thinking));
    c.parser_.emplace(std::move(p));
  } else {
    c.decoder_.emplace(tokenizer, tokenizer::StreamDecoder::Specials::kSkip);
  }
  if (req.logprobs) c.out_.message.logprobs.emplace();
  c.text_offset_ = static_cast<int64_t>(req.prompt_text.size());
  return c;
}

bool ChoiceStream::echo_prompt(const DeltaSink& on_delta) {
  OutputDelta d;
  d.index = index_;
  d.content = req_->prompt_text;
  out_.message.content = req_->prompt_text;
  return on_delta(d);
}

TokenLogprob ChoiceStream::token_logprob(int32_t id, float logprob) const {
  TokenLogprob t;
  t.id = id;
  t.bytes = std::string(tok_->token_bytes(id));
  t.token = req_->tokens_as_ids ? cat("token_id:", id) : t.bytes;
  t.logprob = logprob;
  return t;
}

StatusOr<bool> ChoiceStream::feed(int32_t id, const v1::GenerateLogprobs* logprobs,
                                  const DeltaSink& on_delta) {
  generated_ids_.push_back(id);
  chat::ChatDelta cd;
  std::string text;
  if (parser_) {
    K3_RETURN_IF_ERROR(parser_->feed(id, &cd));
    text = std::move(cd.content);
    if (!cd.reasoning_content.empty()) ++out_.message.reasoning_tokens;
  } else {
    K3_RETURN_IF_ERROR(decoder_->feed(id, &text));
  }
  std::optional<LogprobEntry> lp;
  if (req_->logprobs && logprobs != nullptr) {
    lp.emplace();
    static_cast<TokenLogprob&>(*lp) = token_logprob(id, logprobs->logprob());
    lp->text_offset = text_offset_;
    for (const auto& t : logprobs->top()) lp->top.push_back(token_logprob(t.token(), t.logprob()));
    text_offset_ += static_cast<int64_t>(lp->bytes.size());
  }
  return emit(cd, std::move(text), std::move(lp), on_delta);
}

bool ChoiceStream::emit(const chat::ChatDelta& cd, std::string text, std::optional<LogprobEntry> lp,
                        const DeltaSink& on_delta) {
  OutputMessage& m = out_.message;
  OutputDelta d;
  d.index = index_;
  if (req_->logprobs) {
    d.logprobs.emplace();
    if (lp) {
      d.logprobs->push_back(*lp);
      m.logprobs->push_back(std::move(*lp));
    }
  }
  d.reasoning_content = cd.reasoning_content;
  if (!stopped_) {
    bool hit = false;
    d.content = stop_.feed(text, &hit);
    stopped_ = hit;
  }
  for (const auto& tc : cd.tool_calls) {
    ToolCallOut o;
    o.index = tc.index;
    while (call_ids_.size() <= tc.index) call_ids_.push_back(random_id("call_"));
    if (tc.name) {
      o.id = call_ids_[tc.index];
      o.name = *tc.name;
      m.tool_calls.push_back({o.id, o.name, ""});
    }
    o.arguments = tc.arguments;
    if (tc.index < m.tool_calls.size()) m.tool_calls[tc.index].arguments += tc.arguments;
    d.tool_calls.push_back(std::move(o));
  }
  m.reasoning_content += d.reasoning_content;
  m.content += d.content;
  if (d.empty()) return true;
  return on_delta(d);
}

bool ChoiceStream::finish(v1::GenerateFinished::Reason reason, const DeltaSink& on_delta) {
  done_ = true;
  chat::ChatDelta tail;
  std::string text;
  if (parser_) {
    parser_->finish(&tail);
    text = std::move(tail.content);
  } else {
    decoder_->finish(&text);
  }
  if (!emit(tail, std::move(text), std::nullopt, on_delta)) return false;
  OutputDelta d;
  d.index = index_;
  if (!stopped_) {
    d.content = stop_.flush();
    out_.message.content += d.content;
  }
  FinishReason& r = out_.reason;
  r = reason == v1::GenerateFinished::LENGTH ? FinishReason::kLength : FinishReason::kStop;
  if (r == FinishReason::kStop && !out_.message.tool_calls.empty()) r = FinishReason::kToolCalls;
  if (stopped_ && r == FinishReason::kStop) out_.stop_sequence = stop_.matched();
  d.finish = r;
  d.stop_sequence = out_.stop_sequence;
  return on_delta(d);
}

bool ChoiceStream::on_engine_finished(v1::GenerateFinished::Reason reason,
                                      const DeltaSink& on_delta) {
  engine_finished_ = true;
  if (done_) return true;
  return finish(reason, on_delta);
}

}  // namespace k3::gateway
