#include "gateway/core/request_preparer.h"

#include <algorithm>

#include "gateway/core/output_form_request.h"
#include "gateway/core/status_codes.h"
#include "shared/chat/segment.h"
#include "shared/chat/xtml_render.h"
#include "shared/chat/xtml_tokens.h"

namespace k3::gateway {

RequestPreparer::RequestPreparer(const tokenizer::Tokenizer& tokenizer, GatewayMetrics* metrics,
                                 GeneratorOptions options)
    : tok_(tokenizer), metrics_(metrics), opt_(std::move(options)) {
  max_context_.store(opt_.max_context);
  if (auto id = tok_.special_id(chat::kEndOfMsgToken)) end_of_msg_ = *id;
}

Status RequestPreparer::check_model(const std::string& model) const {
  if (model.empty() || model == opt_.model_name) return absl::OkStatus();
  std::string served = cat("'", opt_.model_name, "'");
  for (const std::string& alias : opt_.model_aliases) {
    if (model == alias) return absl::OkStatus();
    served += cat(", '", alias, "'");
  }
  return absl::NotFoundError(
      cat("model '", model, "' does not exist; this server serves ", served));
}

Status RequestPreparer::check_length(int64_t n) const {
  if (opt_.max_prompt_tokens > 0 && n > opt_.max_prompt_tokens) {
    if (metrics_ != nullptr) metrics_->refused.with({"prompt_tokens"}).inc();
    return payload_too_large(cat("prompt of ", n, " tokens is over this server's limit of ",
                                 opt_.max_prompt_tokens, " tokens"));
  }
  const int64_t ctx = max_context();
  if (ctx > 0 && n >= ctx)
    return absl::OutOfRangeError(cat("this model's maximum context length is ", ctx,
                                     " tokens; the prompt has ", n,
                                     " tokens and leaves no room to generate"));
  return absl::OkStatus();
}

Status RequestPreparer::check_max_tokens(int64_t prompt_tokens, int64_t max_tokens) const {
  if (opt_.max_tokens_limit > 0 && max_tokens > opt_.max_tokens_limit) {
    if (metrics_ != nullptr) metrics_->refused.with({"max_tokens"}).inc();
    return absl::InvalidArgumentError(cat("'max_tokens' is ", max_tokens,
                                          ", over this server's limit of ", opt_.max_tokens_limit,
                                          " tokens per request"));
  }
  const int64_t ctx = max_context();
  if (ctx > 0 && max_tokens > ctx - prompt_tokens)
    return absl::InvalidArgumentError(cat("'max_tokens' is ", max_tokens,
                                          " but this model's context of ", ctx,
                                          " tokens leaves room for only ", ctx - prompt_tokens,
                                          " after the prompt's ", prompt_tokens, " tokens"));
  return absl::OkStatus();
}

Status RequestPreparer::set_sampling(const SamplingOptions& sampling, PreparedRequest& p) const {
  int64_t banned = 0;
  for (const auto& [id, bias] : sampling.logit_bias) {
    if (!tok_.contains(id))
      return absl::InvalidArgumentError(cat("'logit_bias' names token ", id,
                                            ", outside the vocabulary [0, ", tok_.vocab_size(),
                                            ")"));
    banned += bias <= -100.0f;
  }
  // Every token the tokenizer knows banned: the reply could only be ids it
  // cannot decode (the model's padding), or nothing.
  if (banned > 0 && banned >= tok_.vocab_size())
    return absl::InvalidArgumentError(
        cat("'logit_bias' bans every token of the vocabulary (-100 on all ", tok_.vocab_size(),
            "): nothing is left to generate"));
  p.sampling = resolve_sampling(sampling, opt_.sampling);
  p.seed = sampling.seed;
  p.expert_top_p = sampling.expert_top_p;
  return absl::OkStatus();
}

StatusOr<RequestPreparer::EncodedChat> RequestPreparer::encode_chat(
    const nlohmann::ordered_json& render) const {
  chat::RenderOptions ro;
  ro.developer_as_system = true;
  K3_ASSIGN_OR_RETURN(chat::Segments segments, chat::render_chat(render, ro));
  // Encoded message by message, noting where each starts: those turn
  // boundaries are where engined may keep a state checkpoint, so an edit of a
  // later message does not re-prefill earlier ones. (BPE never crosses a
  // segment, so the pieces join to the whole prompt's encoding.)
  EncodedChat out;
  size_t from = 0;
  for (size_t i = 1; i <= segments.size(); ++i) {
    const bool message_start = i < segments.size() && segments[i].markup &&
                               segments[i].text == chat::kOpenToken && i + 1 < segments.size() &&
                               segments[i + 1].text.rfind("message", 0) == 0;
    if (!message_start && i < segments.size()) continue;
    const chat::Segments span(segments.begin() + static_cast<std::ptrdiff_t>(from),
                              segments.begin() + static_cast<std::ptrdiff_t>(i));
    K3_ASSIGN_OR_RETURN(std::vector<int32_t> ids, chat::encode_segments(tok_, span));
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    if (i < segments.size()) out.message_starts.push_back(static_cast<uint32_t>(out.ids.size()));
    from = i;
  }
  return out;
}

StatusOr<PreparedRequest> RequestPreparer::prepare_chat(const ChatCall& call) const {
  K3_RETURN_IF_ERROR(check_model(call.model));
  PreparedRequest p;
  p.chat = true;
  p.model = opt_.model_name;
  K3_ASSIGN_OR_RETURN(p.thinking, chat::thinking_enabled(call.render));
  K3_ASSIGN_OR_RETURN(EncodedChat enc, encode_chat(call.render));
  p.prompt_ids = std::move(enc.ids);
  p.checkpoint_positions = std::move(enc.message_starts);
  // An earlier turn of this conversation: the ids it really ran in place of
  // its re-rendered form, so engined's session continues.
  if (auto hit = turns_.find(p.prompt_ids, p.checkpoint_positions)) {
    std::vector<int32_t> ids = std::move(hit->ran);
    ids.insert(ids.end(), p.prompt_ids.begin() + static_cast<std::ptrdiff_t>(hit->rendered_len),
               p.prompt_ids.end());
    std::vector<uint32_t> starts;
    for (uint32_t s : p.checkpoint_positions) {
      if (s <= hit->prompt_len)
        starts.push_back(s);
      else if (s >= hit->rendered_len)
        starts.push_back(static_cast<uint32_t>(s - hit->rendered_len + hit->ran_len));
    }
    p.prompt_ids = std::move(ids);
    p.checkpoint_positions = std::move(starts);
  }
  p.render = call.render;
  K3_ASSIGN_OR_RETURN(
      p.constraint,
      output_constraint(call.render, p.thinking, call.parallel_tool_calls, call.thinking_budget));
  K3_RETURN_IF_ERROR(check_length(static_cast<int64_t>(p.prompt_ids.size())));
  K3_RETURN_IF_ERROR(check_max_tokens(static_cast<int64_t>(p.prompt_ids.size()), call.max_tokens));
  K3_RETURN_IF_ERROR(set_sampling(call.sampling, p));
  p.stop = call.stop;
  p.max_tokens = call.max_tokens;
  p.logprobs = call.logprobs;
  p.top_logprobs = call.top_logprobs;
  p.tokens_as_ids = call.tokens_as_ids;
  p.n = call.n;
  return p;
}

void RequestPreparer::remember_turn(const PreparedRequest& req,
                                    const std::vector<int32_t>& generated,
                                    const OutputMessage& message) const {
  // Only a reply that ended at a stop token, and without tool calls (their
  // arguments come back re-serialized by the client).
  if (!req.chat || !end_of_msg_ || generated.empty() || !opt_.stops.contains(generated.back()) ||
      !message.tool_calls.empty() || !req.render.contains("messages"))
    return;
  nlohmann::ordered_json history = req.render;
  history["messages"].push_back({{"role", "assistant"}, {"content", message.content}});
  history["messages"].push_back({{"role", "user"}, {"content", "."}});
  auto enc = encode_chat(history);
  // Its last two message starts: the placeholder user message, then the
  // generation prompt; the record ends where the placeholder begins.
  if (!enc.ok() || enc->message_starts.size() < 2) return;
  const size_t end = enc->message_starts[enc->message_starts.size() - 2];
  if (end == 0 || enc->ids[end - 1] != *end_of_msg_) return;
  std::vector<int32_t> rendered(enc->ids.begin(),
                                enc->ids.begin() + static_cast<std::ptrdiff_t>(end));
  // What ran, the stop token that ended it written as the rendering closes
  // a reply: after an [EOS] the conversation goes on after <|end_of_msg|>,
  // never after a token the model only sees at the end of a document.
  // (engined's session never ran the last token either: the next prompt
  // re-uses it up to the token before.)
  std::vector<int32_t> ran = req.prompt_ids;
  ran.insert(ran.end(), generated.begin(), generated.end() - 1);
  ran.push_back(*end_of_msg_);
  const size_t common = static_cast<size_t>(
      std::mismatch(rendered.begin(), rendered.end(), ran.begin(), ran.end()).first -
      rendered.begin());
  if (common == rendered.size()) return;  // nothing to replace
  turns_.remember(std::move(rendered), std::move(ran), common);
}

StatusOr<PreparedRequest> RequestPreparer::prepare_completion(const CompletionCall& call) const {
  K3_RETURN_IF_ERROR(check_model(call.model));
  PreparedRequest p;
  p.model = opt_.model_name;
  if (call.prompt_is_ids) {
    for (size_t i = 0; i < call.prompt_ids.size(); ++i)
      if (!tok_.contains(call.prompt_ids[i]))
        return absl::InvalidArgumentError(cat("prompt[", i, "]: token id ", call.prompt_ids[i],
                                              " is outside the vocabulary [0, ", tok_.vocab_size(),
                                              ")"));
    p.prompt_ids = call.prompt_ids;
    if (call.echo) {
      K3_ASSIGN_OR_RETURN(p.prompt_text, tok_.decode(p.prompt_ids));
    }
  } else {
    K3_ASSIGN_OR_RETURN(p.prompt_ids, tok_.encode(call.prompt));
    if (call.echo) p.prompt_text = call.prompt;
  }
  if (p.prompt_ids.empty()) return absl::InvalidArgumentError("'prompt' is empty");
  K3_RETURN_IF_ERROR(check_length(static_cast<int64_t>(p.prompt_ids.size())));
  K3_RETURN_IF_ERROR(check_max_tokens(static_cast<int64_t>(p.prompt_ids.size()), call.max_tokens));
  K3_RETURN_IF_ERROR(set_sampling(call.sampling, p));
  p.stop = call.stop;
  p.max_tokens = call.max_tokens;
  p.logprobs = call.logprobs.has_value();
  p.top_logprobs = call.logprobs.value_or(0);
  p.tokens_as_ids = call.tokens_as_ids;
  p.n = call.n;
  return p;
}

}  // namespace k3::gateway
