#include "gateway/core/generator.h"

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "gateway/core/output_form_request.h"
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
  p.n = call.n;
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
  p.n = call.n;
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

// One choice's decoding: its parser, stop strings and output so far.
struct Generator::ChoiceRun {
  ChoiceRun(int i, const std::vector<std::string>& stops) : index(i), stop(stops) {}
  int index;
  std::optional<chat::OutputTokenParser> parser;    // chat
  std::optional<tokenizer::StreamDecoder> decoder;  // completions
  StopMatcher stop;
  ChoiceResult out;
  std::vector<std::string> call_ids;
  std::vector<int32_t> generated_ids;
  int64_t text_offset = 0;
  bool stopped = false;  // by a stop string
  bool done = false;     // by a stop string or engined's finished event
  bool engine_finished = false;
  v1::GenerateFinished::Reason reason = v1::GenerateFinished::LENGTH;
};

bool Generator::emit(const PreparedRequest& req, ChoiceRun& c, const chat::ChatDelta& cd,
                     std::string text, std::optional<LogprobEntry> lp,
                     const std::function<bool(const OutputDelta&)>& on_delta) const {
  OutputMessage& m = c.out.message;
  OutputDelta d;
  d.index = c.index;
  if (req.logprobs) {
    d.logprobs.emplace();
    if (lp) {
      d.logprobs->push_back(*lp);
      m.logprobs->push_back(std::move(*lp));
    }
  }
  d.reasoning_content = cd.reasoning_content;
  if (!c.stopped) {
    bool hit = false;
    d.content = c.stop.feed(text, &hit);
    c.stopped = hit;
  }
  for (const auto& tc : cd.tool_calls) {
    ToolCallOut o;
    o.index = tc.index;
    while (c.call_ids.size() <= tc.index) c.call_ids.push_back("call_" + random_alnum(24));
    if (tc.name) {
      o.id = c.call_ids[tc.index];
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

StatusOr<GenerationResult> Generator::run(const PreparedRequest& req, Ticket ticket,
                                          RequestContext& ctx,
                                          const std::function<bool(const OutputDelta&)>& on_delta) {
  auto log = logger("gateway");
  const auto t0 = Clock::now();
  const int64_t n = static_cast<int64_t>(req.prompt_ids.size());
  const int64_t room = max_context() > 0 ? max_context() - n : (int64_t{1} << 30);
  if (room <= 0) return check_length(n);
  if (req.n < 1 || req.n > kMaxChoices)
    return absl::InvalidArgumentError(cat("'n' must be between 1 and ", kMaxChoices));
  // No max_tokens given: what the context leaves, at most the server's limit.
  const int64_t by_default =
      opt_.max_tokens_limit > 0 ? std::min(room, opt_.max_tokens_limit) : room;

  v1::GenerateRequest g;
  g.set_request_id(ctx.id);
  for (int32_t id : req.prompt_ids) g.add_prompt_ids(id);
  g.set_max_tokens(static_cast<uint32_t>(std::min<int64_t>(
      req.max_tokens > 0 ? req.max_tokens : by_default, std::min<int64_t>(room, UINT32_MAX))));
  *g.mutable_sampling() = req.sampling;
  // Choice i samples with seed + i (engined): without the client's seed, one
  // random base for all of them, so the choices still differ.
  g.mutable_sampling()->set_seed(req.seed ? *req.seed : std::random_device{}() * 0x9E3779B9ull);
  if (req.constraint) *g.mutable_sampling()->mutable_constraint() = *req.constraint;
  for (uint32_t p : req.checkpoint_positions) g.add_checkpoint_positions(p);
  // A chat reply ends with its message, whatever the model's eos ids are.
  if (req.chat && end_of_msg_) g.add_stop_ids(*end_of_msg_);
  g.set_session_hint(-1);
  g.set_logprobs(req.logprobs);
  g.set_top_logprobs(static_cast<uint32_t>(req.top_logprobs));
  if (req.expert_top_p) g.set_expert_top_p(*req.expert_top_p);
  if (req.n > 1) g.set_n(static_cast<uint32_t>(req.n));

  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(ctx.deadline - Clock::now());
  K3_ASSIGN_OR_RETURN(auto stream, engine_->generate(g, deadline));

  std::vector<ChoiceRun> runs;
  runs.reserve(static_cast<size_t>(req.n));
  for (int i = 0; i < req.n; ++i) {
    ChoiceRun& c = runs.emplace_back(i, req.stop);
    if (req.chat) {
      K3_ASSIGN_OR_RETURN(auto p, chat::OutputTokenParser::create(tok_, req.thinking));
      c.parser.emplace(std::move(p));
    } else {
      c.decoder.emplace(tok_, tokenizer::StreamDecoder::Specials::kSkip);
    }
    if (req.logprobs) c.out.message.logprobs.emplace();
    c.text_offset = static_cast<int64_t>(req.prompt_text.size());
  }
  GenerationResult result;
  bool first_token = true;
  int64_t generated = 0;  // all choices
  Clock::time_point t_first;
  Status failure;

  if (!req.chat && !req.prompt_text.empty()) {
    // echo: the prompt comes first, outside stop-string matching.
    for (ChoiceRun& c : runs) {
      OutputDelta d;
      d.index = c.index;
      d.content = req.prompt_text;
      c.out.message.content = req.prompt_text;
      if (!on_delta(d)) return absl::CancelledError("client went away");
    }
  }
  auto all_done = [&] {
    return std::all_of(runs.begin(), runs.end(), [](const ChoiceRun& c) { return c.done; });
  };
  // A choice is over (engined finished it, or a stop string): close what the
  // model left open, release held-back text, and tell the client how it
  // ended. False when the client is gone.
  auto finalize = [&](ChoiceRun& c) {
    c.done = true;
    chat::ChatDelta tail;
    std::string text;
    if (c.parser) {
      c.parser->finish(&tail);
      text = std::move(tail.content);
    } else {
      c.decoder->finish(&text);
    }
    if (!emit(req, c, tail, std::move(text), std::nullopt, on_delta)) return false;
    OutputDelta d;
    d.index = c.index;
    if (!c.stopped) {
      d.content = c.stop.flush();
      c.out.message.content += d.content;
    }
    FinishReason& r = c.out.reason;
    r = c.reason == v1::GenerateFinished::LENGTH ? FinishReason::kLength : FinishReason::kStop;
    if (r == FinishReason::kStop && !c.out.message.tool_calls.empty()) r = FinishReason::kToolCalls;
    d.finish = r;
    return on_delta(d);
  };
  v1::GenerateEvent ev;
  bool finished = false;  // the engined call ended
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
      result.usage.cached_tokens = ev.started().reused_tokens();
      result.usage.restored_tokens = ev.started().restored_tokens();
      continue;
    }
    if (ev.choice() >= runs.size()) {
      stream->cancel();
      failure = absl::InternalError(
          cat("engined sent choice ", ev.choice(), " of a request of ", runs.size()));
      break;
    }
    ChoiceRun& c = runs[ev.choice()];
    if (ev.has_token()) {
      // A choice a stop string ended: engined decodes it on, unseen.
      if (c.done) continue;
      if (first_token) {
        t_first = Clock::now();
        metrics_->time_to_first_token.observe(since(t0));
        first_token = false;
      }
      ++generated;
      c.generated_ids.push_back(ev.token());
      chat::ChatDelta cd;
      std::string text;
      if (c.parser) {
        K3_RETURN_IF_ERROR(c.parser->feed(ev.token(), &cd));
        text = std::move(cd.content);
      } else {
        K3_RETURN_IF_ERROR(c.decoder->feed(ev.token(), &text));
      }
      std::optional<LogprobEntry> lp;
      if (req.logprobs && ev.has_logprobs()) {
        lp.emplace();
        static_cast<TokenLogprob&>(*lp) =
            token_logprob(ev.token(), ev.logprobs().logprob(), req.tokens_as_ids);
        lp->text_offset = c.text_offset;
        for (const auto& t : ev.logprobs().top())
          lp->top.push_back(token_logprob(t.token(), t.logprob(), req.tokens_as_ids));
        c.text_offset += static_cast<int64_t>(lp->bytes.size());
      }
      if (!emit(req, c, cd, std::move(text), std::move(lp), on_delta) ||
          (ctx.alive && !ctx.alive())) {
        stream->cancel();
        failure = absl::CancelledError("client went away");
        break;
      }
      if (c.stopped) {
        c.reason = v1::GenerateFinished::STOP;
        if (!finalize(c)) {
          stream->cancel();
          failure = absl::CancelledError("client went away");
          break;
        }
      }
    } else if (ev.has_finished()) {
      c.engine_finished = true;
      if (!c.done) {
        c.reason = ev.finished().reason();
        if (!finalize(c)) {
          stream->cancel();
          failure = absl::CancelledError("client went away");
          break;
        }
      }
    }
    // Every choice over, one by a stop string: engined stops at the
    // cancellation (else its stream ends by itself, next).
    if (all_done() && !std::all_of(runs.begin(), runs.end(),
                                   [](const ChoiceRun& r) { return r.engine_finished; })) {
      stream->cancel();
      break;
    }
  }
  if (!failure.ok()) {
    if (failure.code() == absl::StatusCode::kCancelled) metrics_->cancelled.inc();
    log->info("[{}] ended early after {} tokens: {}", ctx.id, generated, msg(failure));
    return failure;
  }
  if (!all_done()) return absl::UnavailableError("engined ended the stream without finishing");
  ticket.release();
  int64_t longest = 0;
  for (ChoiceRun& c : runs) {
    // Choice 0 (only) is the conversation's continuation.
    if (c.index == 0 && c.out.reason == FinishReason::kStop && !c.stopped)
      remember_turn(req, c.generated_ids, c.out.message);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(c.generated_ids.size()));
    result.choices.push_back(std::move(c.out));
  }
  Usage& u = result.usage;
  u.prompt_tokens = n;
  u.completion_tokens = generated;
  metrics_->prompt_tokens.inc(static_cast<double>(n));
  metrics_->cached_tokens.inc(static_cast<double>(u.cached_tokens));
  metrics_->restored_tokens.inc(static_cast<double>(u.restored_tokens));
  metrics_->generated_tokens.inc(static_cast<double>(generated));
  // Per decode step: the choices' tokens of one step come together.
  if (longest > 1)
    metrics_->decode_per_token.observe(since(t_first) / static_cast<double>(longest - 1));
  log->info("[{}] done: prompt {} (cached {}, restored {}), generated {}{}, {} in {:.3f} s", ctx.id,
            n, u.cached_tokens, u.restored_tokens, generated,
            req.n > 1 ? cat(" over ", req.n, " choices") : std::string(),
            finish_reason_name(result.choices[0].reason), since(t0));
  return result;
}

}  // namespace k3::gateway
