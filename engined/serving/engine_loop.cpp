#include "engined/serving/engine_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "engined/model/chunk_pass.h"
#include "shared/base/log.h"
#include "shared/base/seconds_since.h"

namespace k3::engined {

using k3::experts::ExpertSource;
using k3::experts::ExpertSourceStats;
using k3::experts::RemoteHostStats;

namespace {

using Clock = std::chrono::steady_clock;
using base::seconds_since;

}  // namespace

struct EngineLoop::Job {
  ServeRequest req;
  std::shared_ptr<RequestHandle> handle;
  Sampler sampler;
  std::vector<int64_t> stops;
  SessionPlan plan;
  bool prefilled = false;
  int32_t pending = -1;        // last sampled token, not yet run through the model
  int64_t prefill_total = 0;   // prompt tokens this request computes (after reuse)
  int64_t prefill_done = 0;    // of them, computed so far
  bool at_checkpoint = false;  // this round's prefill piece ends at a new checkpoint
  bool at_snapshot = false;    // ... or at a new prefill snapshot
  int64_t generated = 0;
  Clock::time_point t_decode;
  double prefill_seconds = 0;
  std::optional<grammar::ConstraintState> grammar;  // with a constraint
  std::vector<uint8_t> mask;                        // the grammar's, per step
  ThinkBudget think;                                // req.think_budget's count
  int choice = 0;          // which of the request's n choices this job decodes
  std::vector<int> forks;  // choice 0 until its prefill ends: choices 1..n-1's sessions
  // The big chunk being read (chunk_policy.h), its ids, and its tokens
  // counted as done so far (its share of the pass's work).
  std::unique_ptr<ChunkPass> pass;
  std::vector<int32_t> pass_ids;
  PassProgress pass_progress;
  Status pass_failed;  // the pass could not start
  explicit Job(ServeRequest r)
      : req(std::move(r)),
        handle(std::make_shared<RequestHandle>()),
        sampler(req.sampling),
        think(req.think_budget) {
    if (req.constraint) grammar.emplace(req.constraint);
  }
};

StatusOr<std::unique_ptr<EngineLoop>> EngineLoop::create(std::unique_ptr<Model> model,
                                                         const EngineLoopOptions& opt) {
  if (opt.sessions < 1 || opt.sessions > 1024)
    return absl::InvalidArgumentError(cat("sessions ", opt.sessions, " is outside [1, 1024]"));
  const int64_t vocab = model->config().vocab_size;
  for (int32_t id : opt.stop_ids)
    if (id < 0 || id >= vocab)
      return absl::InvalidArgumentError(
          cat("stop token ", id, " is outside the vocabulary [0, ", vocab, ")"));
  K3_ASSIGN_OR_RETURN(auto ck,
                      CheckpointStore::open(opt.checkpoints, model->config(), model->fingerprint(),
                                            model->options().quant.dense_bits));
  std::unique_ptr<ExpertSource> experts;
  auto x = make_expert_source(opt.experts, *model);
  if (x.ok())
    experts = std::move(*x);
  else if (opt.experts.expertd_segments.empty())
    return x.status();
  else
    base::logger("engined")->warn("expertd not attached yet ({}); retrying on first use",
                                  msg(x.status()));
  return std::unique_ptr<EngineLoop>(
      new EngineLoop(std::move(model), opt, std::move(ck), std::move(experts)));
}

EngineLoop::EngineLoop(std::unique_ptr<Model> model, const EngineLoopOptions& opt,
                       std::unique_ptr<CheckpointStore> checkpoints,
                       std::unique_ptr<ExpertSource> experts)
    : model_(std::move(model)),
      experts_(std::move(experts)),
      opt_(opt),
      checkpoints_(std::move(checkpoints)),
      pool_(*model_, opt.sessions),
      placement_(Placement{opt.experts.expertd_segments, opt.experts.remote_hosts}),
      pacer_(opt.pass_part_seconds),
      policy_max_(ChunkPolicy::max_tokens(model_->config(), physical_ram_bytes(),
                                          checkpoints_->enabled() ? opt.snapshot_tokens : 0)) {
  counters_.sessions = static_cast<uint32_t>(opt.sessions);
  counters_.checkpoint_budget_bytes = opt.checkpoints.budget_bytes;
  counters_.checkpoint_disk_budget_bytes =
      checkpoints_->disk_enabled() ? opt.checkpoints.disk_budget_bytes : 0;
  counters_.checkpoint_disk_bytes = checkpoints_->disk_bytes();
  update_host_counters();
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
  K3_RETURN_IF_ERROR(check_request(*model_, opt_.sessions, &request));
  auto job = std::make_unique<Job>(std::move(request));
  job->sampler.set_context(job->req.prompt, opt_.unpenalized_ids);
  job->stops.assign(opt_.stop_ids.begin(), opt_.stop_ids.end());
  job->stops.insert(job->stops.end(), job->req.stop_ids.begin(), job->req.stop_ids.end());
  std::sort(job->req.checkpoint_positions.begin(), job->req.checkpoint_positions.end());
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

Status EngineLoop::set_placement(const std::vector<std::string>& segments,
                                 const std::vector<RemoteHost>& remote_hosts, uint64_t version) {
  return placement_.request(Placement{segments, remote_hosts}, version, [this] {
    { std::lock_guard<std::mutex> lk(mu_); }  // the loop is waiting, or sees it pending
    cv_.notify_all();
  });
}

void EngineLoop::apply_placement() {
  std::optional<Placement> p = placement_.posted();
  if (!p) return;
  Status s = swap_expert_source(*p, *model_, &opt_.experts, &experts_, &host_counters_);
  update_host_counters();
  placement_.applied(std::move(*p), std::move(s));
}

Status EngineLoop::ensure_experts() {
  if (experts_) return absl::OkStatus();
  K3_ASSIGN_OR_RETURN(experts_, make_expert_source(opt_.experts, *model_));
  return absl::OkStatus();
}

void EngineLoop::update_host_counters() {
  std::vector<RemoteHostStats> now = host_counters_.current(experts_.get());
  std::lock_guard<std::mutex> lk(mu_);
  counters_.remote_hosts = std::move(now);
}

void EngineLoop::poll_hosts() {
  if (opt_.experts.remote_hosts.empty()) return;
  if (ensure_experts().ok()) experts_->prepare().IgnoreError();  // down hosts: logged
  update_host_counters();
}

EngineCounters EngineLoop::counters() const {
  std::lock_guard<std::mutex> lk(mu_);
  return counters_;
}

void EngineLoop::admit() {
  // The pool and the checkpoints belong to this thread: the lock guards only
  // the inbox and the counters, so a checkpoint read from disk does not block
  // submit(), Stats or Describe.
  for (;;) {
    std::unique_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (inbox_.empty()) return;
      // A request of n choices waits for n free sessions (first come, first
      // served: a later, smaller request does not overtake it).
      if (!inbox_.front()->handle->cancel_.load() && pool_.free_count() < inbox_.front()->req.n)
        return;
      job = std::move(inbox_.front());
      inbox_.pop_front();
      if (job->handle->cancel_.load()) ++counters_.cancelled;
    }
    if (job->handle->cancel_.load()) {
      ServeEvent e;
      e.kind = ServeEvent::Kind::kFailed;
      e.status = absl::CancelledError("cancelled while queued");
      job->handle->push(e);
      continue;
    }
    auto plan = pool_.acquire(job->req.prompt, job->req.session_hint, checkpoints_.get(),
                              job->req.expert_top_p);
    if (!plan.ok()) {  // cannot happen with a free session; keep its place
      std::lock_guard<std::mutex> lk(mu_);
      inbox_.push_front(std::move(job));
      return;
    }
    job->plan = *plan;
    // The other choices' sessions, held until the prefill ends and the state
    // is copied into them (free_count() >= n was checked above).
    for (int c = 1; c < job->req.n; ++c) {
      auto blank = pool_.acquire_blank();
      if (blank.ok()) job->forks.push_back(*blank);
    }
    const int64_t n = static_cast<int64_t>(job->req.prompt.size());
    ServeEvent e;
    e.kind = ServeEvent::Kind::kStarted;
    e.plan = job->plan;
    e.prefill_tokens = n - job->plan.reused - job->plan.restored;
    {
      std::lock_guard<std::mutex> lk(mu_);
      counters_.prompt_tokens += static_cast<uint64_t>(n);
      counters_.reused_tokens += static_cast<uint64_t>(job->plan.reused);
      counters_.restored_tokens += static_cast<uint64_t>(job->plan.restored);
      if (job->plan.restored > 0) ++counters_.checkpoint_restores;
      counters_.sessions_busy = static_cast<uint32_t>(pool_.busy());
      counters_.session_evictions = pool_.evictions();
    }
    job->handle->push(e);
    // Progress before the first piece is computed (done = 0), so a caller
    // hears of a long prompt's reading at once.
    job->prefill_total = e.prefill_tokens;
    if (job->prefill_total > 0) {
      int reading = 1;  // this prompt and those being read already
      for (const auto& j : active_) reading += !j->prefilled;
      report_progress(*job, reading);
    }
    active_.push_back(std::move(job));
  }
}

void EngineLoop::copy_model_counters() {
  counters_.experts = experts_ ? experts_->stats() : ExpertSourceStats{};
  counters_.speculation = model_->speculation();
  counters_.experts_pruned = model_->times().experts_pruned;
}

void EngineLoop::finish(Job& job, ServeEvent e, bool keep_state) {
  pool_.release(job.plan.session, keep_state);
  for (int f : job.forks) pool_.release(f, /*keep=*/false);
  job.forks.clear();
  // A request fails once: the first of its choices to fail reports it, the
  // others leave without a word.
  const bool silent = e.kind == ServeEvent::Kind::kFailed && job.handle->failed_.exchange(true);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (e.kind == ServeEvent::Kind::kFailed && !silent) {
      if (e.status.code() == absl::StatusCode::kCancelled)
        ++counters_.cancelled;
      else
        ++counters_.failed;
    }
    counters_.sessions_busy = static_cast<uint32_t>(pool_.busy());
    copy_model_counters();
    counters_.checkpoint_bytes = checkpoints_->bytes();
  }
  update_host_counters();
  if (silent) return;
  // The session is free before the caller hears the end, so a follow-up
  // request finds it.
  job.handle->push(std::move(e));
}

void EngineLoop::report_progress(Job& job, int reading) {
  ServeEvent e;
  e.kind = ServeEvent::Kind::kProgress;
  e.done = job.prefill_done + job.pass_progress.done();
  e.total = job.prefill_total;
  e.eta_s = prefill_rate_.eta_seconds(e.total - e.done, reading);
  job.handle->push(std::move(e));
}

void EngineLoop::step_all() {
  const int64_t chunk = std::max<int64_t>(1, model_->options().chunk);
  ServeEvent fail;
  fail.kind = ServeEvent::Kind::kFailed;
  // Cancelled requests, and the choices of a request one of whose choices
  // failed, leave before the pass (their state is consistent: nothing of
  // this round has run).
  for (size_t i = 0; i < active_.size();) {
    if (active_[i]->handle->cancel_.load() || active_[i]->handle->failed_.load()) {
      fail.status = absl::CancelledError("cancelled");
      // Mid-pass, the state holds part of a chunk: dropped.
      finish(*active_[i], fail, /*keep_state=*/active_[i]->pass == nullptr);
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  if (active_.empty()) return;

  // Each request's next piece: a prefill piece (up to the chunk size, cut at
  // the next checkpoint position) or the token it sampled last round.
  // A long prompt goes through a pass (chunk_policy.h); one at a time, the
  // others wait for it.
  Job* big = opt_.chunk_policy ? start_pass() : nullptr;
  std::vector<Model::Piece> pieces;
  std::vector<int> piece_of(active_.size(), -1);
  for (size_t i = 0; i < active_.size(); ++i) {
    Job& job = *active_[i];
    if (&job == big || (big != nullptr && wants_pass(job))) continue;
    Session& s = pool_.at(job.plan.session);
    const int64_t n = static_cast<int64_t>(job.req.prompt.size());
    Model::Piece p;
    p.seq = s.state.get();
    p.expert_top_p = job.req.expert_top_p;
    job.at_checkpoint = false;
    job.at_snapshot = false;
    if (!job.prefilled) {
      const int64_t pos = static_cast<int64_t>(s.tokens.size());
      int64_t end = std::min(n, pos + chunk);
      if (checkpoints_->enabled()) {
        for (int64_t q : job.req.checkpoint_positions)
          if (q > pos && q <= end && q < n) {
            end = q;
            job.at_checkpoint = !checkpoints_->has(job.req.prompt, q, job.req.expert_top_p);
            break;
          }
        end = snapshot_cut(job, pos, end, n);
      }
      if (end == pos) continue;  // the whole prompt is covered: sample now
      p.ids.assign(job.req.prompt.begin() + pos, job.req.prompt.begin() + end);
      p.want_logits = end == n || job.at_checkpoint || job.at_snapshot;
    } else {
      p.ids = {job.pending};
      p.want_logits = true;
    }
    piece_of[i] = static_cast<int>(pieces.size());
    pieces.push_back(std::move(p));
  }

  // One pass for all of them (a lone request can stop between layers).
  std::vector<float> logits;
  const auto t0 = Clock::now();
  Status st;
  if (!pieces.empty()) {
    st = ensure_experts();
    if (!st.ok()) st = absl::UnavailableError(cat("no expert source: ", msg(st)));
  }
  // A piece that went non-finite fails alone (piece_status); the rest go on.
  std::vector<Status> piece_status;
  if (!pieces.empty() && st.ok())
    st = model_->forward_batch(*experts_, pieces, &logits,
                               active_.size() == 1 ? &active_[0]->handle->cancel_ : nullptr,
                               &piece_status);
  const double pass_seconds = seconds_since(t0);
  const int64_t V = model_->config().vocab_size;
  // The step's prefill tokens over its time: a sample of the prefill rate
  // (prefill_rate.h), taken before this step's progress goes out. The
  // prompts with tokens left after it share the rate in their estimates.
  int reading = 1;
  if (st.ok()) {
    int64_t prefill = 0;
    int left = 0;
    for (size_t i = 0; i < active_.size(); ++i) {
      const Job& j = *active_[i];
      const int k = piece_of[i];
      if (k < 0 || j.prefilled || !piece_status[static_cast<size_t>(k)].ok()) continue;
      const auto piece = static_cast<int64_t>(pieces[static_cast<size_t>(k)].ids.size());
      prefill += piece;
      left += j.prefill_done + piece < j.prefill_total;
    }
    prefill_rate_.add(prefill, pass_seconds);
    reading = std::max(left, 1);
  }
  // The pass's part (pass_pacer.h).
  Status pass_st = big != nullptr ? big->pass_failed : absl::OkStatus();
  if (big != nullptr && pass_st.ok()) {
    pass_st = ensure_experts();
    if (!pass_st.ok()) pass_st = absl::UnavailableError(cat("no expert source: ", msg(pass_st)));
  }
  int64_t pass_read = 0;  // prompt tokens the part moved (counted as read)
  if (big != nullptr && pass_st.ok()) {
    const double budget =
        pacer_.part_budget(pieces.empty() ? std::nullopt : std::optional<double>(pass_seconds));
    const auto t1 = Clock::now();
    auto done = big->pass->advance(*experts_, budget, &big->handle->cancel_);
    const double secs = seconds_since(t1);
    big->prefill_seconds += secs;
    if (done.ok())
      pass_read =
          big->pass_progress.add_part(PassProgress::tokens_read(*big->pass), secs, &prefill_rate_);
    else
      pass_st = done.status();
  }
  // Every step, before its tokens go out: whoever saw a token sees the
  // step's expert reads, and /metrics moves during a long request.
  if (!pieces.empty() || big != nullptr) {
    std::lock_guard<std::mutex> lk(mu_);
    copy_model_counters();
    counters_.prefill_tokens += pass_read;
    counters_.prefill_tokens_per_second = prefill_rate_.tokens_per_second();
  }

  std::vector<std::unique_ptr<Job>> still;
  size_t logit_row = 0;
  for (size_t i = 0; i < active_.size(); ++i) {
    Job& job = *active_[i];
    if (&job == big && !pass_st.ok()) {
      fail.status = pass_st;
      finish(job, fail, /*keep_state=*/false);
      continue;
    }
    if (piece_of[i] >= 0 && (!st.ok() || !piece_status[piece_of[i]].ok())) {
      fail.status = st.ok() ? piece_status[piece_of[i]] : st;
      if (st.ok() && pieces[static_cast<size_t>(piece_of[i])].want_logits) ++logit_row;
      finish(job, fail, /*keep_state=*/false);
      continue;
    }
    Session& s = pool_.at(job.plan.session);
    const int64_t n = static_cast<int64_t>(job.req.prompt.size());
    bool keep = true;
    // What ran for this job: a piece of the batch, or the pass when it ended.
    const std::vector<int32_t>* ran = nullptr;
    const float* row = nullptr;
    double ran_seconds = 0;
    if (&job == big) {
      if (!job.pass->done()) {
        report_progress(job, 1);
        still.push_back(std::move(active_[i]));
        continue;
      }
      ran = &job.pass_ids;
      if (!job.pass->logits().empty()) row = job.pass->logits().data();
    } else if (piece_of[i] >= 0) {
      const Model::Piece& p = pieces[static_cast<size_t>(piece_of[i])];
      ran = &p.ids;
      if (p.want_logits) row = logits.data() + logit_row++ * V;
      ran_seconds = pass_seconds;
    }
    if (ran != nullptr) {
      s.tokens.insert(s.tokens.end(), ran->begin(), ran->end());
      if (row != nullptr)
        s.logits.assign(row, row + V);
      else
        s.logits.clear();
      if (!job.prefilled) {
        job.prefill_seconds += ran_seconds;  // a pass counts its parts as they run
        if (&job != big) {                   // a pass's tokens were counted part by part
          std::lock_guard<std::mutex> lk(mu_);
          counters_.prefill_tokens += ran->size();
        }
        job.prefill_done += static_cast<int64_t>(ran->size());
        job.pass_progress.reset();
        report_progress(job, &job == big ? 1 : reading);
        const int64_t end = static_cast<int64_t>(s.tokens.size());
        if (end == n || job.at_checkpoint || job.at_snapshot) save_checkpoint(job, s, end);
      }
    }
    if (&job == big) {
      job.pass.reset();
      job.pass_ids.clear();
    }
    if (!job.prefilled) {
      if (static_cast<int64_t>(s.tokens.size()) < n) {
        still.push_back(std::move(active_[i]));
        continue;
      }
      job.prefilled = true;
      job.t_decode = Clock::now();
      // n > 1: the other choices start from a copy of this state.
      std::vector<std::unique_ptr<Job>> choices = fork_choices(job);
      keep = sample_next(job, s);
      if (keep) still.push_back(std::move(active_[i]));
      for (auto& c : choices)
        if (sample_next(*c, pool_.at(c->plan.session))) still.push_back(std::move(c));
      continue;
    }
    keep = sample_next(job, s);
    if (keep) still.push_back(std::move(active_[i]));
  }
  active_ = std::move(still);
}

bool EngineLoop::wants_pass(const Job& job) {
  if (job.pass != nullptr) return true;
  if (job.prefilled) return false;
  const auto left = static_cast<int64_t>(job.req.prompt.size()) -
                    static_cast<int64_t>(pool_.at(job.plan.session).tokens.size());
  return left >= ChunkPolicy::kMinTokens;
}

EngineLoop::Job* EngineLoop::start_pass() {
  for (auto& j : active_)
    if (j->pass != nullptr) return j.get();
  for (auto& j : active_) {
    Job& job = *j;
    if (!wants_pass(job)) continue;
    Session& s = pool_.at(job.plan.session);
    const std::vector<int32_t>& prompt = job.req.prompt;
    const float top_p = job.req.expert_top_p;
    const auto n = static_cast<int64_t>(prompt.size());
    const auto pos = static_cast<int64_t>(s.tokens.size());
    const bool saving = checkpoints_->enabled();
    const std::vector<int64_t> none;
    const std::vector<int64_t>& turns = saving ? job.req.checkpoint_positions : none;
    const int64_t every = saving ? opt_.snapshot_tokens : 0;
    const int64_t end = ChunkPolicy::end(pos, n, policy_max_, turns, every);
    job.at_checkpoint = end < n && std::binary_search(turns.begin(), turns.end(), end) &&
                        !checkpoints_->has(prompt, end, top_p);
    job.at_snapshot = !job.at_checkpoint && every > 0 && end < n && end % every == 0 &&
                      !checkpoints_->has(prompt, end, top_p);
    job.pass_ids.assign(prompt.begin() + pos, prompt.begin() + end);
    auto pass = model_->begin_chunk(*s.state, job.pass_ids,
                                    end == n || job.at_checkpoint || job.at_snapshot, top_p);
    if (pass.ok())
      job.pass = std::move(*pass);
    else
      job.pass_failed = pass.status();
    job.pass_progress.reset();
    return &job;
  }
  return nullptr;
}

std::vector<std::unique_ptr<EngineLoop::Job>> EngineLoop::fork_choices(Job& job) {
  std::vector<std::unique_ptr<Job>> out;
  for (size_t k = 0; k < job.forks.size(); ++k) {
    const int c = static_cast<int>(k) + 1;
    ServeRequest r = job.req;
    r.n = 1;
    r.sampling.seed += static_cast<uint64_t>(c);  // choice c: seed + c
    auto child = std::make_unique<Job>(std::move(r));
    child->handle = job.handle;
    child->choice = c;
    child->sampler.set_context(child->req.prompt, opt_.unpenalized_ids);
    child->stops = job.stops;
    child->plan.session = job.forks[k];
    pool_.fork(job.plan.session, job.forks[k]);
    child->prefilled = true;
    child->t_decode = job.t_decode;
    child->prefill_seconds = job.prefill_seconds;
    out.push_back(std::move(child));
  }
  job.forks.clear();
  return out;
}

int64_t EngineLoop::snapshot_cut(Job& job, int64_t pos, int64_t end, int64_t n) {
  const int64_t every = opt_.snapshot_tokens;
  if (every <= 0) return end;
  const int64_t q = (pos / every + 1) * every;  // the next multiple after pos
  if (q > end || q >= n) return end;            // the prompt's end is saved anyway
  if (q < end) job.at_checkpoint = false;       // a turn boundary further on waits
  job.at_snapshot =
      !job.at_checkpoint && !checkpoints_->has(job.req.prompt, q, job.req.expert_top_p);
  return q;
}

void EngineLoop::save_checkpoint(Job& job, Session& s, int64_t end) {
  const float p = job.req.expert_top_p;
  const bool had = checkpoints_->has(s.tokens, end, p);
  // A failed save is logged by the store (once a minute, with a count).
  (void)checkpoints_->save(s.tokens, end, *s.state, s.logits, p);
  const bool saved = !had && checkpoints_->has(s.tokens, end, p);
  std::lock_guard<std::mutex> lk(mu_);
  if (saved) ++(job.at_snapshot ? counters_.snapshots_saved : counters_.checkpoints_saved);
  counters_.checkpoint_bytes = checkpoints_->bytes();
  counters_.checkpoint_evictions = checkpoints_->evictions();
  counters_.checkpoint_failed_saves = checkpoints_->failed_saves();
  counters_.checkpoint_disk_bytes = checkpoints_->disk_bytes();
  counters_.snapshot_writes_dropped = checkpoints_->writes_dropped();
}

bool EngineLoop::sample_next(Job& job, Session& s) {
  ServeEvent done;
  done.kind = ServeEvent::Kind::kFinished;
  done.prompt_tokens = static_cast<int64_t>(job.req.prompt.size());
  if (job.generated < job.req.max_tokens &&
      static_cast<int64_t>(s.tokens.size()) < model_->options().max_context) {
    const int64_t vocab = model_->config().vocab_size;
    const uint8_t* mask = nullptr;
    if (job.grammar) {
      // Closing in time: the tokens left, as many as max_tokens and the
      // context allow, and in the think channel as many as its budget
      // allows (think_budget.h).
      const int64_t remaining = job.think.bound(
          *job.req.constraint, *job.grammar,
          std::min(job.req.max_tokens - job.generated,
                   model_->options().max_context - static_cast<int64_t>(s.tokens.size())));
      if (job.grammar->mask(remaining, &job.mask) == 0) {
        ServeEvent fail;
        fail.kind = ServeEvent::Kind::kFailed;
        fail.status = absl::FailedPreconditionError(
            cat("the output constraint allows no token after ", job.generated,
                " generated (an unsatisfiable schema or too few tokens left)"));
        finish(job, fail, /*keep_state=*/true);
        return false;
      }
      job.mask.resize(static_cast<size_t>(vocab), 0);
      mask = job.mask.data();
    }
    const int32_t tok = job.sampler.sample(s.logits.data(), vocab, mask);
    bool grammar_done = false;
    if (job.grammar) {
      if (!job.grammar->accept(tok).ok()) {
        // Only when logit_bias banned every token the constraint allows.
        ServeEvent fail;
        fail.kind = ServeEvent::Kind::kFailed;
        fail.status = absl::InvalidArgumentError(
            "logit_bias bans every token the output constraint allows here");
        finish(job, fail, /*keep_state=*/true);
        return false;
      }
      job.think.accept(tok, job.req.constraint->vocab());
      grammar_done = job.grammar->finished();
      // A think-only constraint complete: the answer goes on free.
      if (grammar_done && job.req.constraint_think_only) {
        job.grammar.reset();
        grammar_done = false;
      }
    }
    ServeEvent te;
    te.kind = ServeEvent::Kind::kToken;
    te.choice = job.choice;
    te.token = tok;
    if (job.req.logprobs)
      te.logprobs =
          token_logprobs(s.logits.data(), model_->config().vocab_size, tok, job.req.top_logprobs);
    job.handle->push(te);
    ++job.generated;
    job.pending = tok;
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++counters_.generated_tokens;
    }
    const bool stop =
        grammar_done || std::find(job.stops.begin(), job.stops.end(), tok) != job.stops.end();
    if (!stop && job.generated < job.req.max_tokens) return true;
    done.reason = stop ? StopReason::kStop : StopReason::kLength;
  } else {
    done.reason = StopReason::kLength;
  }
  done.choice = job.choice;
  done.completion_tokens = job.generated;
  done.prefill_seconds = job.prefill_seconds;
  done.decode_seconds = seconds_since(job.t_decode);
  {
    std::lock_guard<std::mutex> lk(mu_);
    // One prefill however many choices share it.
    if (job.choice == 0) counters_.prefill_seconds += done.prefill_seconds;
    counters_.decode_seconds += done.decode_seconds;
  }
  finish(job, done, /*keep_state=*/true);
  return false;
}

void EngineLoop::run() {
  for (;;) {
    bool work = true;
    {
      std::unique_lock<std::mutex> lk(mu_);
      auto ready = [&] {
        return stop_ || placement_.pending() ||
               (!inbox_.empty() && pool_.free_count() >= inbox_.front()->req.n) ||
               !active_.empty() || std::any_of(inbox_.begin(), inbox_.end(), [](const auto& j) {
                 return j->handle->cancel_.load();
               });
      };
      // With remote hosts, an idle loop polls their health every second.
      if (opt_.experts.remote_hosts.empty())
        cv_.wait(lk, ready);
      else
        work = cv_.wait_for(lk, std::chrono::seconds(1), ready);
      if (stop_) break;
    }
    if (!work) {
      poll_hosts();
      continue;
    }
    apply_placement();
    admit();
    step_all();
  }
  placement_.close();
}

}  // namespace k3::engined
