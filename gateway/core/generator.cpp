#include "gateway/core/generator.h"

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "gateway/core/output_constraint.h"
#include "gateway/core/status_codes.h"
#include "gateway/core/stop_matcher.h"
#include "shared/base/log.h"
#include "shared/chat/segment.h"
#include "shared/chat/xtml_render.h"
#include "shared/chat/xtml_tokens.h"

namespace k3::gateway {

namespace v1 = k3serve::v1;
using Clock = std::chrono::steady_clock;

namespace {

std::string random_alnum(size_t n) {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string s(n, ' ');
  for (auto& c : s) c = kChars[rng() % (sizeof kChars - 1)];
  return s;
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

std::string Generator::new_id(std::string_view prefix) {
  return cat(prefix, random_alnum(24));
}

Generator::Generator(tokenizer::Tokenizer tokenizer, EngineClient* engine,
                     AdmissionQueue* admission, GatewayMetrics* metrics, GeneratorOptions options)
    : tok_(std::move(tokenizer)),
      engine_(engine),
      admission_(admission),
      metrics_(metrics),
      opt_(std::move(options)) {
  max_context_.store(opt_.max_context);
  if (auto id = tok_.special_id(chat::kEndOfMsgToken)) end_of_msg_ = *id;
}

void Generator::set_max_context(int64_t n) {
  max_context_.store(n);
}
int64_t Generator::max_context() const {
  return max_context_.load();
}

Status Generator::check_model(const std::string& model) const {
  if (!model.empty() && model != opt_.model_name)
    return absl::NotFoundError(
        cat("model '", model, "' does not exist; this server serves '", opt_.model_name, "'"));
  return absl::OkStatus();
}

Status Generator::check_length(int64_t n) const {
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

Status Generator::check_max_tokens(int64_t prompt_tokens, int64_t max_tokens) const {
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

Status Generator::set_sampling(const SamplingOptions& sampling, PreparedRequest& p) const {
  for (const auto& [id, bias] : sampling.logit_bias)
    if (!tok_.contains(id))
      return absl::InvalidArgumentError(cat("'logit_bias' names token ", id,
                                            ", outside the vocabulary [0, ", tok_.vocab_size(),
                                            ")"));
  p.sampling = resolve_sampling(sampling, opt_.sampling);
  p.seed = sampling.seed;
  p.expert_top_p = sampling.expert_top_p;
  return absl::OkStatus();
}

StatusOr<Generator::EncodedChat> Generator::encode_chat(
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

StatusOr<PreparedRequest> Generator::prepare_chat(const ChatCall& call) const {
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
  K3_ASSIGN_OR_RETURN(p.constraint,
                      output_constraint(call.render, p.thinking, call.parallel_tool_calls));
  K3_RETURN_IF_ERROR(check_length(static_cast<int64_t>(p.prompt_ids.size())));
  K3_RETURN_IF_ERROR(check_max_tokens(static_cast<int64_t>(p.prompt_ids.size()), call.max_tokens));
  K3_RETURN_IF_ERROR(set_sampling(call.sampling, p));
  p.stop = call.stop;
  p.max_tokens = call.max_tokens;
  p.logprobs = call.logprobs;
  p.top_logprobs = call.top_logprobs;
  p.tokens_as_ids = call.tokens_as_ids;
  return p;
}

void Generator::remember_turn(const PreparedRequest& req, const std::vector<int32_t>& generated,
                              const OutputMessage& message) const {
  // Only a reply that ended with its end-of-message token, and without tool
  // calls (their arguments come back re-serialized by the client).
  if (!req.chat || !end_of_msg_ || generated.empty() || generated.back() != *end_of_msg_ ||
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
  std::vector<int32_t> ran = req.prompt_ids;
  ran.insert(ran.end(), generated.begin(), generated.end());
  const size_t common = static_cast<size_t>(
      std::mismatch(rendered.begin(), rendered.end(), ran.begin(), ran.end()).first -
      rendered.begin());
  if (common == rendered.size()) return;  // nothing to replace
  turns_.remember(std::move(rendered), std::move(ran), common);
}

StatusOr<PreparedRequest> Generator::prepare_completion(const CompletionCall& call) const {
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
  return p;
}

TokenLogprob Generator::token_logprob(int32_t id, float logprob, bool as_id) const {
  TokenLogprob t;
  t.id = id;
  t.bytes = std::string(tok_.token_bytes(id));
  t.token = as_id ? cat("token_id:", id) : t.bytes;
  t.logprob = logprob;
  return t;
}

StatusOr<GenerationResult> Generator::run(const PreparedRequest& req, Ticket ticket,
                                          RequestContext& ctx,
                                          const std::function<bool(const OutputDelta&)>& on_delta) {
  auto log = logger("gateway");
  const auto t0 = Clock::now();
  const int64_t n = static_cast<int64_t>(req.prompt_ids.size());
  const int64_t room = max_context() > 0 ? max_context() - n : (int64_t{1} << 30);
  if (room <= 0) return check_length(n);
  // No max_tokens given: what the context leaves, at most the server's limit.
  const int64_t by_default =
      opt_.max_tokens_limit > 0 ? std::min(room, opt_.max_tokens_limit) : room;

  v1::GenerateRequest g;
  g.set_request_id(ctx.id);
  for (int32_t id : req.prompt_ids) g.add_prompt_ids(id);
  g.set_max_tokens(static_cast<uint32_t>(std::min<int64_t>(
      req.max_tokens > 0 ? req.max_tokens : by_default, std::min<int64_t>(room, UINT32_MAX))));
  *g.mutable_sampling() = req.sampling;
  g.mutable_sampling()->set_seed(req.seed ? *req.seed : std::random_device{}() * 0x9E3779B9ull);
  if (req.constraint) *g.mutable_sampling()->mutable_constraint() = *req.constraint;
  for (uint32_t p : req.checkpoint_positions) g.add_checkpoint_positions(p);
  // A chat reply ends with its message, whatever the model's eos ids are.
  if (req.chat && end_of_msg_) g.add_stop_ids(*end_of_msg_);
  g.set_session_hint(-1);
  g.set_logprobs(req.logprobs);
  g.set_top_logprobs(static_cast<uint32_t>(req.top_logprobs));
  if (req.expert_top_p) g.set_expert_top_p(*req.expert_top_p);

  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(ctx.deadline - Clock::now());
  K3_ASSIGN_OR_RETURN(auto stream, engine_->generate(g, deadline));

  std::optional<chat::OutputTokenParser> parser;
  std::optional<tokenizer::StreamDecoder> decoder;
  if (req.chat) {
    K3_ASSIGN_OR_RETURN(auto p, chat::OutputTokenParser::create(tok_, req.thinking));
    parser.emplace(std::move(p));
  } else {
    decoder.emplace(tok_, tokenizer::StreamDecoder::Specials::kSkip);
  }
  StopMatcher stop(req.stop);
  GenerationResult result;
  std::vector<std::string> call_ids;
  bool stopped = false, first_token = true;
  int64_t generated = 0;
  std::vector<int32_t> generated_ids;
  Clock::time_point t_first;
  Status failure;

  // Applies a parsed step: stop strings on the visible text, ids on new
  // tool calls; hands it to the client. False when the client is gone.
  if (req.logprobs) result.message.logprobs.emplace();
  int64_t text_offset = static_cast<int64_t>(req.prompt_text.size());
  auto emit = [&](const chat::ChatDelta& cd, std::string text,
                  std::optional<LogprobEntry> lp = std::nullopt) -> bool {
    OutputDelta d;
    if (req.logprobs) {
      d.logprobs.emplace();
      if (lp) {
        d.logprobs->push_back(*lp);
        result.message.logprobs->push_back(std::move(*lp));
      }
    }
    d.reasoning_content = cd.reasoning_content;
    if (!stopped) {
      bool hit = false;
      d.content = stop.feed(text, &hit);
      stopped = hit;
    }
    for (const auto& tc : cd.tool_calls) {
      ToolCallOut o;
      o.index = tc.index;
      while (call_ids.size() <= tc.index) call_ids.push_back("call_" + random_alnum(24));
      if (tc.name) {
        o.id = call_ids[tc.index];
        o.name = *tc.name;
        result.message.tool_calls.push_back({o.id, o.name, ""});
      }
      o.arguments = tc.arguments;
      if (tc.index < result.message.tool_calls.size())
        result.message.tool_calls[tc.index].arguments += tc.arguments;
      d.tool_calls.push_back(std::move(o));
    }
    result.message.reasoning_content += d.reasoning_content;
    result.message.content += d.content;
    if (d.empty()) return true;
    return on_delta(d);
  };

  if (!req.chat && !req.prompt_text.empty()) {
    // echo: the prompt comes first, outside stop-string matching.
    OutputDelta d;
    d.content = req.prompt_text;
    result.message.content = req.prompt_text;
    if (!on_delta(d)) return absl::CancelledError("client went away");
  }
  v1::GenerateEvent ev;
  bool finished = false;
  bool engine_done = false;
  v1::GenerateFinished::Reason reason = v1::GenerateFinished::LENGTH;
  while (!finished) {
    if (stopping_.load()) {
      stream->cancel();
      failure = absl::UnavailableError("the gateway is shutting down");
      break;
    }
    if (Clock::now() >= ctx.deadline) {
      stream->cancel();
      failure = absl::DeadlineExceededError(
          cat("request deadline passed after ", generated, " generated tokens"));
      break;
    }
    Status st;
    if (!stream->next(&ev, 200, &finished, &st)) {
      if (finished) {
        if (!st.ok()) failure = st;
        break;
      }
      if (ctx.alive && !ctx.alive()) {
        stream->cancel();
        failure = absl::CancelledError("client went away");
        break;
      }
      continue;
    }
    if (ev.has_started()) {
      result.finish.usage.cached_tokens = ev.started().reused_tokens();
      result.finish.usage.restored_tokens = ev.started().restored_tokens();
    } else if (ev.has_token()) {
      if (first_token) {
        t_first = Clock::now();
        metrics_->time_to_first_token.observe(since(t0));
        first_token = false;
      }
      ++generated;
      generated_ids.push_back(ev.token());
      chat::ChatDelta cd;
      std::string text;
      if (parser) {
        K3_RETURN_IF_ERROR(parser->feed(ev.token(), &cd));
        text = std::move(cd.content);
      } else {
        K3_RETURN_IF_ERROR(decoder->feed(ev.token(), &text));
      }
      std::optional<LogprobEntry> lp;
      if (req.logprobs && ev.has_logprobs()) {
        lp.emplace();
        static_cast<TokenLogprob&>(*lp) =
            token_logprob(ev.token(), ev.logprobs().logprob(), req.tokens_as_ids);
        lp->text_offset = text_offset;
        for (const auto& t : ev.logprobs().top())
          lp->top.push_back(token_logprob(t.token(), t.logprob(), req.tokens_as_ids));
        text_offset += static_cast<int64_t>(lp->bytes.size());
      }
      if (!emit(cd, std::move(text), std::move(lp)) || (ctx.alive && !ctx.alive())) {
        stream->cancel();
        failure = absl::CancelledError("client went away");
        break;
      }
      if (stopped) {
        // A stop string: engined stops at the cancellation.
        stream->cancel();
        reason = v1::GenerateFinished::STOP;
        engine_done = true;
        break;
      }
    } else if (ev.has_finished()) {
      reason = ev.finished().reason();
      engine_done = true;
    }
  }
  if (!failure.ok()) {
    if (failure.code() == absl::StatusCode::kCancelled) metrics_->cancelled.inc();
    log->info("[{}] ended early after {} tokens: {}", ctx.id, generated, msg(failure));
    return failure;
  }
  if (!engine_done) return absl::UnavailableError("engined ended the stream without finishing");
  ticket.release();
  // Close what the model left open; release held-back text.
  chat::ChatDelta tail;
  std::string text;
  if (parser) {
    parser->finish(&tail);
    text = std::move(tail.content);
  } else {
    decoder->finish(&text);
  }
  emit(tail, std::move(text));
  if (!stopped) {
    OutputDelta d;
    d.content = stop.flush();
    result.message.content += d.content;
    if (!d.empty()) on_delta(d);
  }
  Finish& f = result.finish;
  f.reason = reason == v1::GenerateFinished::LENGTH ? FinishReason::kLength : FinishReason::kStop;
  if (f.reason == FinishReason::kStop && !result.message.tool_calls.empty())
    f.reason = FinishReason::kToolCalls;
  f.usage.prompt_tokens = n;
  f.usage.completion_tokens = generated;
  if (f.reason == FinishReason::kStop && !stopped)
    remember_turn(req, generated_ids, result.message);
  metrics_->prompt_tokens.inc(static_cast<double>(n));
  metrics_->cached_tokens.inc(static_cast<double>(f.usage.cached_tokens));
  metrics_->restored_tokens.inc(static_cast<double>(f.usage.restored_tokens));
  metrics_->generated_tokens.inc(static_cast<double>(generated));
  if (generated > 1)
    metrics_->decode_per_token.observe(since(t_first) / static_cast<double>(generated - 1));
  log->info("[{}] done: prompt {} (cached {}, restored {}), generated {}, {} in {:.3f} s", ctx.id,
            n, f.usage.cached_tokens, f.usage.restored_tokens, generated,
            finish_reason_name(f.reason), since(t0));
  return result;
}

}  // namespace k3::gateway
