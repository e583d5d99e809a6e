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

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// engined's call ends at the request's deadline too; none (max) stays none.
std::chrono::system_clock::time_point system_deadline(Clock::time_point deadline) {
  using System = std::chrono::system_clock;
  const auto left = deadline - Clock::now();
  if (deadline == Clock::time_point::max() || left > std::chrono::hours(24 * 365))
    return System::time_point::max();
  return System::now() + std::chrono::duration_cast<System::duration>(left);
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
  const GeneratorOptions& opt = preparer_.options();

  K3_ASSIGN_OR_RETURN(auto stream, engine_->generate(engine_request(req, ctx, room),
                                                     system_deadline(ctx.deadline)));

  std::vector<ChoiceStream> choices;
  choices.reserve(static_cast<size_t>(req.n));
  for (int i = 0; i < req.n; ++i) {
    K3_ASSIGN_OR_RETURN(ChoiceStream c, ChoiceStream::create(i, req, tok_));
    choices.push_back(std::move(c));
  }
  // What the client last got (a delta or a note): the cadence of the notes.
  Clock::time_point last_sent = Clock::now();
  const DeltaSink deliver = [&](const OutputDelta& d) {
    last_sent = Clock::now();
    return on_delta(d);
  };
  ProgressNote reading;   // engined's last report of the prompt's reading
  bool reported = false;  // engined made one
  const auto note = [&](ProgressNote::Phase phase) {
    if (!ctx.on_progress) return true;
    ProgressNote out = reading;
    out.phase = phase;
    last_sent = Clock::now();
    return ctx.on_progress(out);
  };
  const auto interval = seconds(opt.progress_interval_s);
  // Polls often enough to keep the cadence, at most five times a second.
  const int poll_ms = static_cast<int>(std::clamp(opt.progress_interval_s * 250.0, 10.0, 200.0));

  const auto client_gone = [] { return absl::CancelledError("client went away"); };
  if (!req.chat && !req.prompt_text.empty()) {
    for (ChoiceStream& c : choices)
      if (!c.echo_prompt(deliver)) return client_gone();
  }
  const auto all = [&](bool (ChoiceStream::*what)() const) {
    return std::all_of(choices.begin(), choices.end(),
                       [&](const ChoiceStream& c) { return (c.*what)(); });
  };

  GenerationResult result;
  int64_t generated = 0;  // all choices
  std::optional<Clock::time_point> t_first;
  // When engined's last event was handled: --progress-timeout-s runs from
  // here (the time spent handing it to a slow client is not engined's).
  Clock::time_point last_event = Clock::now();
  v1::GenerateEvent ev;
  bool finished = false;   // the engined call ended
  bool truncated = false;  // the deadline ended it with what it generated
  bool got_event = false;  // the step handled an event of engined
  // The request's deadline passed: the end (a non-streamed answer keeps what
  // it generated), else an error.
  const auto at_deadline = [&]() -> StatusOr<bool> {
    if (ctx.keep_partial_at_deadline && generated > 0) {
      truncated = true;
      return true;
    }
    return absl::DeadlineExceededError(
        cat("request deadline passed after ", generated, " generated tokens"));
  };
  // One event (or a poll's timeout): false to go on, true when the call is
  // over; an error ends the request early.
  const auto step = [&]() -> StatusOr<bool> {
    if (stopping_.load()) return absl::UnavailableError("the gateway is shutting down");
    const auto now = Clock::now();
    if (now >= ctx.deadline) return at_deadline();
    if (opt.progress_timeout_s > 0 && now - last_event >= seconds(opt.progress_timeout_s))
      return absl::DeadlineExceededError(
          cat("no progress for ", opt.progress_timeout_s,
              " s (--progress-timeout-s): engined sent no token and no report of the prompt's "
              "reading"));
    if (now - last_sent >= interval) {
      // The prompt's reading repeated while it lasts, else a keep-alive.
      const bool in_prefill = reported && !t_first && reading.done < reading.total;
      if (!note(in_prefill ? ProgressNote::Phase::kPrefill : ProgressNote::Phase::kKeepAlive))
        return client_gone();
    }
    Status st;
    if (!stream->next(&ev, poll_ms, &finished, &st)) {
      if (finished) {
        if (st.ok()) return true;
        // engined's call carries the deadline too and may end first.
        if (Clock::now() >= ctx.deadline) return at_deadline();
        return st;
      }
      if (ctx.alive && !ctx.alive()) return client_gone();
      return false;
    }
    got_event = true;
    if (ev.has_started()) {
      // Every prompt token not computed again: continued from the session
      // plus restored from a checkpoint or snapshot (the breakdown).
      result.usage.cached_tokens =
          int64_t{ev.started().reused_tokens()} + ev.started().restored_tokens();
      result.usage.restored_tokens = ev.started().restored_tokens();
      return false;
    }
    if (ev.has_progress()) {
      reading.done = ev.progress().done();
      reading.total = ev.progress().total();
      reading.eta_s = ev.progress().eta_s();
      reported = true;
      if (!note(ProgressNote::Phase::kPrefill)) return client_gone();
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
          c.feed(ev.token(), ev.has_logprobs() ? &ev.logprobs() : nullptr, deliver));
      if (!delivered || (ctx.alive && !ctx.alive())) return client_gone();
      if (c.stopped() && !c.finish(v1::GenerateFinished::STOP, deliver)) return client_gone();
    } else if (ev.has_finished()) {
      if (!c.on_engine_finished(ev.finished().reason(), deliver)) return client_gone();
    }
    // Every choice over, one by a stop string: engined stops at the
    // cancellation (else its stream ends by itself, next).
    return all(&ChoiceStream::done) && !all(&ChoiceStream::engine_finished);
  };
  Status failure;
  for (;;) {
    got_event = false;
    StatusOr<bool> end = step();
    if (got_event) last_event = Clock::now();
    if (end.ok() && !*end && !finished) continue;
    // The one early exit: engined is told to stop unless its call ended.
    if (!finished) stream->cancel();
    if (!end.ok()) failure = end.status();
    break;
  }
  // Cut by the deadline: each choice still open ends as max_tokens would
  // end it (what the parser holds is closed and handed out).
  if (failure.ok() && truncated) {
    result.truncated_at_deadline = true;
    for (ChoiceStream& c : choices)
      if (!c.done() && !c.finish(v1::GenerateFinished::LENGTH, deliver)) failure = client_gone();
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
  log->info(
      "[{}] done: prompt {} (cached {}, of them restored {}), generated {}{}, {}{} in {:.3f} s",
      ctx.id, n, u.cached_tokens, u.restored_tokens, generated,
      req.n > 1 ? cat(" over ", req.n, " choices") : std::string(),
      finish_reason_name(result.choices[0].reason),
      truncated ? " (cut by the request deadline)" : "", since(t0));
  return result;
}

}  // namespace k3::gateway
