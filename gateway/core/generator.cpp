#include "gateway/core/generator.h"

#include <algorithm>
#include <optional>
#include <random>

#include "gateway/core/choice_stream.h"
#include "gateway/core/status_codes.h"
#include "shared/base/log.h"

namespace k3::gateway {

namespace v1 = k3serve::v1;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

Generator::Generator(tokenizer::Tokenizer tokenizer, EngineClient* engine,
                     AdmissionQueue* admission, GatewayMetrics* metrics, GeneratorOptions options)
    : tok_(std::move(tokenizer)),
      engine_(engine),
      admission_(admission),
      metrics_(metrics),
      preparer_(tok_, metrics, std::move(options)) {}

v1::GenerateRequest Generator::engine_request(const PreparedRequest& req, const RequestContext& ctx,
                                              int64_t room) const {
  // No max_tokens given: what the context leaves, at most the server's limit.
  const int64_t limit = preparer_.options().max_tokens_limit;
  const int64_t by_default = limit > 0 ? std::min(room, limit) : room;
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
  // The model's stop tokens, which engined computes from its own copy of
  // the checkpoint by the same rule: sent so that this gateway's files decide
  // where its replies end.
  for (int32_t id : preparer_.options().stops.ids) g.add_stop_ids(id);
  g.set_session_hint(-1);
  g.set_logprobs(req.logprobs);
  g.set_top_logprobs(static_cast<uint32_t>(req.top_logprobs));
  if (req.expert_top_p) g.set_expert_top_p(*req.expert_top_p);
  if (req.n > 1) g.set_n(static_cast<uint32_t>(req.n));
  return g;
}

StatusOr<GenerationResult> Generator::run(const PreparedRequest& req, Ticket ticket,
                                          RequestContext& ctx,
                                          const std::function<bool(const OutputDelta&)>& on_delta) {
  auto log = base::logger("gateway");
  const auto t0 = Clock::now();
  const int64_t n = static_cast<int64_t>(req.prompt_ids.size());
  const int64_t room = max_context() > 0 ? max_context() - n : (int64_t{1} << 30);
  if (room <= 0) return preparer_.check_length(n);
  if (req.n < 1 || req.n > api::kMaxChoices)
    return absl::InvalidArgumentError(cat("'n' must be between 1 and ", api::kMaxChoices));

  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(ctx.deadline - Clock::now());
  K3_ASSIGN_OR_RETURN(auto stream, engine_->generate(engine_request(req, ctx, room), deadline));

  std::vector<ChoiceStream> choices;
  choices.reserve(static_cast<size_t>(req.n));
  for (int i = 0; i < req.n; ++i) {
    K3_ASSIGN_OR_RETURN(ChoiceStream c, ChoiceStream::create(i, req, tok_));
    choices.push_back(std::move(c));
  }
  const auto client_gone = [] { return absl::CancelledError("client went away"); };
  if (!req.chat && !req.prompt_text.empty()) {
    for (ChoiceStream& c : choices)
      if (!c.echo_prompt(on_delta)) return client_gone();
  }
  const auto all = [&](bool (ChoiceStream::*what)() const) {
    return std::all_of(choices.begin(), choices.end(),
                       [&](const ChoiceStream& c) { return (c.*what)(); });
  };

  GenerationResult result;
  int64_t generated = 0;  // all choices
  std::optional<Clock::time_point> t_first;
  v1::GenerateEvent ev;
  bool finished = false;  // the engined call ended
  // One event (or a poll's timeout): false to go on, true when the call is
  // over; an error ends the request early.
  const auto step = [&]() -> StatusOr<bool> {
    if (stopping_.load()) return absl::UnavailableError("the gateway is shutting down");
    if (Clock::now() >= ctx.deadline)
      return absl::DeadlineExceededError(
          cat("request deadline passed after ", generated, " generated tokens"));
    Status st;
    if (!stream->next(&ev, 200, &finished, &st)) {
      if (finished) return st.ok() ? StatusOr<bool>(true) : StatusOr<bool>(st);
      if (ctx.alive && !ctx.alive()) return client_gone();
      return false;
    }
    if (ev.has_started()) {
      result.usage.cached_tokens = ev.started().reused_tokens();
      result.usage.restored_tokens = ev.started().restored_tokens();
      return false;
    }
    if (ev.choice() >= choices.size())
      return absl::InternalError(
          cat("engined sent choice ", ev.choice(), " of a request of ", choices.size()));
    ChoiceStream& c = choices[ev.choice()];
    if (ev.has_token()) {
      // A choice a stop string ended: engined decodes it on, unseen.
      if (c.done()) return false;
      if (!t_first) {
        t_first = Clock::now();
        metrics_->time_to_first_token.observe(since(t0));
      }
      ++generated;
      K3_ASSIGN_OR_RETURN(
          bool delivered,
          c.feed(ev.token(), ev.has_logprobs() ? &ev.logprobs() : nullptr, on_delta));
      if (!delivered || (ctx.alive && !ctx.alive())) return client_gone();
      if (c.stopped() && !c.finish(v1::GenerateFinished::STOP, on_delta)) return client_gone();
    } else if (ev.has_finished()) {
      if (!c.on_engine_finished(ev.finished().reason(), on_delta)) return client_gone();
    }
    // Every choice over, one by a stop string: engined stops at the
    // cancellation (else its stream ends by itself, next).
    return all(&ChoiceStream::done) && !all(&ChoiceStream::engine_finished);
  };
  Status failure;
  for (;;) {
    StatusOr<bool> end = step();
    if (end.ok() && !*end && !finished) continue;
    // The one early exit: engined is told to stop unless its call ended.
    if (!finished) stream->cancel();
    if (!end.ok()) failure = end.status();
    break;
  }
  if (!failure.ok()) {
    if (failure.code() == absl::StatusCode::kCancelled) metrics_->cancelled.inc();
    log->info("[{}] ended early after {} tokens: {}", ctx.id, generated, msg(failure));
    return failure;
  }
  if (!all(&ChoiceStream::done))
    return absl::UnavailableError("engined ended the stream without finishing");
  ticket.release();
  int64_t longest = 0;
  for (ChoiceStream& c : choices) {
    // Choice 0 (only) is the conversation's continuation.
    if (c.index() == 0 && c.result().reason == FinishReason::kStop && !c.stopped())
      preparer_.remember_turn(req, c.generated_ids(), c.result().message);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(c.generated_ids().size()));
    result.choices.push_back(c.take_result());
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
    metrics_->decode_per_token.observe(since(*t_first) / static_cast<double>(longest - 1));
  log->info("[{}] done: prompt {} (cached {}, restored {}), generated {}{}, {} in {:.3f} s", ctx.id,
            n, u.cached_tokens, u.restored_tokens, generated,
            req.n > 1 ? cat(" over ", req.n, " choices") : std::string(),
            finish_reason_name(result.choices[0].reason), since(t0));
  return result;
}

}  // namespace k3::gateway
