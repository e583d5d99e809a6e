#include "engined/serving/engine_loop.h"

#include <algorithm>
#include <chrono>

#include <absl/strings/str_join.h>

#include "shared/log.h"

namespace k3::engine {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

bool RequestHandle::next(ServeEvent* out, int timeout_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return !events_.empty(); }))
    return false;
  *out = std::move(events_.front());
  events_.pop_front();
  return true;
}

void RequestHandle::push(ServeEvent e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

struct EngineLoop::Job {
  ServeRequest req;
  std::shared_ptr<RequestHandle> handle;
  Sampler sampler;
  std::vector<int64_t> stops;
  SessionPlan plan;
  bool prefilled = false;
  int32_t pending = -1;  // last sampled token, not yet run through the model
  int64_t generated = 0;
  Clock::time_point t_start, t_decode;
  double prefill_seconds = 0;
  explicit Job(ServeRequest r)
      : req(std::move(r)), handle(std::make_shared<RequestHandle>()), sampler(req.sampling) {}
};

StatusOr<std::unique_ptr<EngineLoop>> EngineLoop::create(std::unique_ptr<Model> model,
                                                         const EngineLoopOptions& opt) {
  if (opt.sessions < 1 || opt.sessions > 1024)
    return absl::InvalidArgumentError(cat("sessions ", opt.sessions, " is outside [1, 1024]"));
  K3_ASSIGN_OR_RETURN(
      auto ck, CheckpointStore::open(opt.checkpoints, model->config(), model->fingerprint()));
  return std::unique_ptr<EngineLoop>(new EngineLoop(std::move(model), opt, std::move(ck)));
}

EngineLoop::EngineLoop(std::unique_ptr<Model> model, const EngineLoopOptions& opt,
                       std::unique_ptr<CheckpointStore> checkpoints)
    : model_(std::move(model)),
      opt_(opt),
      checkpoints_(std::move(checkpoints)),
      pool_(*model_, opt.sessions) {
  counters_.sessions = static_cast<uint32_t>(opt.sessions);
  segments_ = model_->expertd_segments();
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  ServeEvent e;
  e.kind = ServeEvent::Kind::kFailed;
  e.status = absl::CancelledError("engined is shutting down");
  for (auto& j : inbox_) j->handle->push(e);
  for (auto& j : active_) j->handle->push(e);
}

StatusOr<std::shared_ptr<RequestHandle>> EngineLoop::submit(ServeRequest request) {
  const ModelConfig& c = model_->config();
  if (request.prompt.empty()) return absl::InvalidArgumentError("empty prompt: no token ids");
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= c.vocab_size)
      return absl::InvalidArgumentError(cat("token id ", request.prompt[i], " at position ", i,
                                            " is outside the vocabulary [0, ", c.vocab_size, ")"));
  const int64_t limit = model_->options().max_context;
  if (static_cast<int64_t>(request.prompt.size()) >= limit)
    return absl::OutOfRangeError(cat("prompt of ", request.prompt.size(),
                                     " tokens leaves no room in the context of ", limit));
  if (request.max_tokens < 0) return absl::InvalidArgumentError("max_tokens must be >= 0");
  if (request.sampling.temperature < 0 || !(request.sampling.top_p >= 0) ||
      request.sampling.top_p > 1)
    return absl::InvalidArgumentError("temperature must be >= 0 and top_p in [0, 1]");
  if (request.sampling.top_p == 0) request.sampling.top_p = 1;
  auto job = std::make_unique<Job>(std::move(request));
  job->stops = c.eos_token_ids;
  job->stops.insert(job->stops.end(), job->req.stop_ids.begin(), job->req.stop_ids.end());
  std::sort(job->req.checkpoint_positions.begin(), job->req.checkpoint_positions.end());
  job->t_start = Clock::now();
  auto handle = job->handle;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return absl::UnavailableError("engined is shutting down");
    inbox_.push_back(std::move(job));
    ++counters_.requests;
  }
  cv_.notify_all();
  return handle;
}

Status EngineLoop::set_placement(const std::vector<std::string>& segments, uint64_t version) {
  std::unique_lock<std::mutex> lk(mu_);
  if (version != 0 && version <= placement_version_.load()) return absl::OkStatus();
  placement_ = segments;
  placement_pending_ = true;
  cv_.notify_all();
  placement_cv_.wait(lk, [&] { return !placement_pending_ || stop_; });
  if (placement_status_.ok() && version != 0) placement_version_.store(version);
  return placement_status_;
}

void EngineLoop::apply_placement() {
  std::vector<std::string> segs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!placement_pending_) return;
    segs = placement_;
  }
  Status s = model_->set_expertd_segments(segs);
  logger("engined")->info("placement: expertd segments [{}]{}", absl::StrJoin(segs, ", "),
                          s.ok() ? "" : cat(" (not attached yet: ", msg(s), ")"));
  {
    std::lock_guard<std::mutex> lk(mu_);
    placement_status_ = s;
    placement_pending_ = false;
    segments_ = segs;
  }
  placement_cv_.notify_all();
}

std::vector<std::string> EngineLoop::expertd_segments() const {
  std::lock_guard<std::mutex> lk(mu_);
  return segments_;
}

EngineCounters EngineLoop::counters() const {
  std::lock_guard<std::mutex> lk(mu_);
  return counters_;
}

void EngineLoop::admit() {
  std::lock_guard<std::mutex> lk(mu_);
  while (!inbox_.empty()) {
    Job& j = *inbox_.front();
    if (j.handle->cancel_.load()) {
      ++counters_.cancelled;
      ServeEvent e;
      e.kind = ServeEvent::Kind::kFailed;
      e.status = absl::CancelledError("cancelled while queued");
      j.handle->push(e);
      inbox_.pop_front();
      continue;
    }
    if (pool_.busy() == pool_.size()) return;
    auto plan = pool_.acquire(j.req.prompt, j.req.session_hint, checkpoints_.get());
    if (!plan.ok()) return;
    j.plan = *plan;
    const int64_t n = static_cast<int64_t>(j.req.prompt.size());
    ServeEvent e;
    e.kind = ServeEvent::Kind::kStarted;
    e.plan = j.plan;
    e.prefill_tokens = n - j.plan.reused - j.plan.restored;
    counters_.prompt_tokens += static_cast<uint64_t>(n);
    counters_.reused_tokens += static_cast<uint64_t>(j.plan.reused);
    counters_.restored_tokens += static_cast<uint64_t>(j.plan.restored);
    if (j.plan.restored > 0) ++counters_.checkpoint_restores;
    counters_.sessions_busy = static_cast<uint32_t>(pool_.busy());
    j.handle->push(e);
    active_.push_back(std::move(inbox_.front()));
    inbox_.pop_front();
  }
}

void EngineLoop::finish(Job& job, ServeEvent e, bool keep_state) {
  pool_.release(job.plan.session, keep_state);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (e.kind == ServeEvent::Kind::kFailed) {
      if (e.status.code() == absl::StatusCode::kCancelled)
        ++counters_.cancelled;
      else
        ++counters_.failed;
    }
    counters_.sessions_busy = static_cast<uint32_t>(pool_.busy());
    counters_.experts = model_->expert_stats();
    counters_.checkpoint_bytes = checkpoints_->bytes();
  }
  // The session is free before the caller hears the end, so a follow-up
  // request finds it.
  job.handle->push(std::move(e));
}

bool EngineLoop::step(Job& job) {
  Session& s = pool_.at(job.plan.session);
  const int64_t n = static_cast<int64_t>(job.req.prompt.size());
  ServeEvent fail;
  fail.kind = ServeEvent::Kind::kFailed;
  if (job.handle->cancel_.load()) {
    fail.status = absl::CancelledError("cancelled");
    finish(job, fail, /*keep_state=*/true);
    return false;
  }
  std::vector<float> logits;
  if (!job.prefilled) {
    // The next prefill piece ends at the chunk size, the next checkpoint
    // position, or the end of the prompt.
    const auto t0 = Clock::now();
    const int64_t pos = static_cast<int64_t>(s.tokens.size());
    int64_t end = std::min(n, pos + std::max<int64_t>(1, model_->options().chunk));
    bool at_checkpoint = false;
    if (checkpoints_->enabled()) {
      for (int64_t p : job.req.checkpoint_positions)
        if (p > pos && p <= end && p < n) {
          end = p;
          at_checkpoint = !checkpoints_->has(job.req.prompt, p);
          break;
        }
    }
    if (end > pos) {
      std::vector<int32_t> ids(job.req.prompt.begin() + pos, job.req.prompt.begin() + end);
      const bool want_logits = end == n || at_checkpoint;
      Status st =
          model_->forward(*s.state, ids, want_logits ? 1 : 0, &logits, &job.handle->cancel_);
      if (!st.ok()) {
        fail.status = st;
        finish(job, fail, /*keep_state=*/false);
        return false;
      }
      s.tokens.insert(s.tokens.end(), ids.begin(), ids.end());
      if (want_logits)
        s.logits = std::move(logits);
      else
        s.logits.clear();
      {
        std::lock_guard<std::mutex> lk(mu_);
        counters_.prefill_tokens += ids.size();
      }
      if (end == n || at_checkpoint) {
        const bool had = checkpoints_->has(s.tokens, end);
        Status cs = checkpoints_->save(s.tokens, end, *s.state, s.logits);
        if (!cs.ok())
          logger("engined")->warn("[{}] checkpoint not saved: {}", job.req.request_id, msg(cs));
        if (!had && checkpoints_->has(s.tokens, end)) {
          std::lock_guard<std::mutex> lk(mu_);
          ++counters_.checkpoints_saved;
        }
      }
    }
    job.prefill_seconds += seconds_since(t0);
    if (static_cast<int64_t>(s.tokens.size()) < n) return true;
    job.prefilled = true;
    job.t_decode = Clock::now();
  } else {
    // Decode: run the token sampled last step.
    std::vector<int32_t> ids = {job.pending};
    Status st = model_->forward(*s.state, ids, 1, &logits, &job.handle->cancel_);
    if (!st.ok()) {
      fail.status = st;
      finish(job, fail, /*keep_state=*/false);
      return false;
    }
    s.tokens.push_back(job.pending);
    s.logits = std::move(logits);
  }

  ServeEvent done;
  done.kind = ServeEvent::Kind::kFinished;
  done.prompt_tokens = n;
  if (job.generated < job.req.max_tokens &&
      static_cast<int64_t>(s.tokens.size()) < model_->options().max_context) {
    const int32_t tok = job.sampler.sample(s.logits.data(), model_->config().vocab_size);
    ServeEvent te;
    te.kind = ServeEvent::Kind::kToken;
    te.token = tok;
    job.handle->push(te);
    ++job.generated;
    job.pending = tok;
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++counters_.generated_tokens;
    }
    if (std::find(job.stops.begin(), job.stops.end(), tok) == job.stops.end() &&
        job.generated < job.req.max_tokens)
      return true;
    done.reason = job.generated < job.req.max_tokens ||
                          std::find(job.stops.begin(), job.stops.end(), tok) != job.stops.end()
                      ? StopReason::kStop
                      : StopReason::kLength;
  } else {
    done.reason = StopReason::kLength;
  }
  done.completion_tokens = job.generated;
  done.prefill_seconds = job.prefill_seconds;
  done.decode_seconds = seconds_since(job.t_decode);
  {
    std::lock_guard<std::mutex> lk(mu_);
    counters_.prefill_seconds += done.prefill_seconds;
    counters_.decode_seconds += done.decode_seconds;
  }
  finish(job, done, /*keep_state=*/true);
  return false;
}

void EngineLoop::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        return stop_ || placement_pending_ || (!inbox_.empty() && pool_.busy() < pool_.size()) ||
               !active_.empty() || std::any_of(inbox_.begin(), inbox_.end(), [](const auto& j) {
                 return j->handle->cancel_.load();
               });
      });
      if (stop_) break;
    }
    apply_placement();
    admit();
    // One step per active request, in turn.
    for (size_t i = 0; i < active_.size();) {
      if (step(*active_[i]))
        ++i;
      else
        active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  placement_cv_.notify_all();
}

}  // namespace k3::engine
