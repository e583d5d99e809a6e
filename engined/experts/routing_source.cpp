#include "engined/experts/routing_source.h"

#include <algorithm>
#include <chrono>

#include "shared/base/log.h"

namespace k3::engined {

using Clock = std::chrono::steady_clock;

RoutingSource::RoutingSource(std::vector<std::unique_ptr<experts::ExpertSource>> sources)
    : sources_(std::move(sources)),
      ready_(sources_.size(), absl::OkStatus()),
      index_of_(sources_.size()),
      done_(sources_.size()),
      failed_(sources_.size(), false) {}

StatusOr<std::unique_ptr<RoutingSource>> RoutingSource::create(
    std::vector<std::unique_ptr<experts::ExpertSource>> sources) {
  if (sources.empty()) return absl::InvalidArgumentError("a placement needs at least one source");
  for (const auto& s : sources)
    if (s == nullptr) return absl::InvalidArgumentError("a placement source is null");
  return std::unique_ptr<RoutingSource>(new RoutingSource(std::move(sources)));
}

Status RoutingSource::prepare() {
  Status first = absl::OkStatus();
  bool any = false;
  for (size_t s = 0; s < sources_.size(); ++s) {
    ready_[s] = sources_[s]->prepare();
    any = any || ready_[s].ok();
    if (!ready_[s].ok() && first.ok()) first = ready_[s];
  }
  return any ? absl::OkStatus() : first;
}

int RoutingSource::route(int64_t layer, int64_t expert, const std::vector<size_t>& load,
                         const std::vector<bool>& skip) const {
  for (size_t s = 0; s < sources_.size(); ++s)
    if (!skip[s] && !sources_[s]->remote() && sources_[s]->owns(layer, expert))
      return static_cast<int>(s);
  int best = -1;
  for (size_t s = 0; s < sources_.size(); ++s)
    if (!skip[s] && sources_[s]->remote() && sources_[s]->owns(layer, expert) &&
        (best < 0 || load[s] < load[static_cast<size_t>(best)]))
      best = static_cast<int>(s);
  return best;
}

bool RoutingSource::owns(int64_t layer, int64_t expert) const {
  return route(layer, expert, std::vector<size_t>(sources_.size(), 0),
               std::vector<bool>(sources_.size(), false)) >= 0;
}

size_t RoutingSource::outstanding() const {
  size_t n = 0;
  for (const auto& s : sources_) n += s->outstanding();
  return n;
}

experts::ExpertSourceStats RoutingSource::stats() const {
  experts::ExpertSourceStats t;
  for (const auto& src : sources_) t += src->stats();
  t.reissued += reissued_;
  return t;
}

bool RoutingSource::reads_use_host_cores() const {
  bool any = false;
  for (size_t s = 0; s < sources_.size(); ++s) {
    if (sources_[s]->remote() || !ready_[s].ok()) continue;
    if (!sources_[s]->reads_use_host_cores()) return false;
    any = true;
  }
  return any;
}

Status RoutingSource::no_owner(int64_t expert) const {
  // A source that could not be prepared may be the one owning it: its
  // error (naming its host or segment) says why.
  // The first such error's code stays (UNAUTHENTICATED, another model's
  // FAILED_PRECONDITION, UNAVAILABLE).
  std::string why;
  absl::StatusCode code = absl::StatusCode::kNotFound;
  for (size_t s = 0; s < sources_.size(); ++s)
    if (!ready_[s].ok()) {
      if (why.empty()) code = ready_[s].code();
      why += cat(why.empty() ? "" : "; ", msg(ready_[s]));
    }
  if (why.empty())
    return absl::NotFoundError(
        cat("no attached expertd serves expert ", expert, " of layer ", req_.layer));
  return absl::Status(
      code, cat("no attached expertd serves expert ", expert, " of layer ", req_.layer, ": ", why));
}

Status RoutingSource::submit_to(size_t s, const std::vector<size_t>& items) {
  experts::ExpertRequest part;
  part.layer = req_.layer;
  part.priority = req_.priority;
  part.activations = req_.activations;
  for (size_t i : items) part.work.push_back(req_.work[i]);
  index_of_[s] = items;
  done_[s].assign(items.size(), false);
  return sources_[s]->submit(part);
}

Status RoutingSource::submit(const experts::ExpertRequest& r) {
  // Sources that cannot be used now are routed around (ready_ says which).
  prepare().IgnoreError();
  const size_t n = sources_.size();
  // A speculative request goes out beside the demand one in flight, whose
  // request, index map and failures stay.
  const bool speculative = r.priority == experts::ExpertPriority::kSpeculative;
  if (!speculative) {
    req_ = r;
    std::fill(failed_.begin(), failed_.end(), false);
  }
  std::vector<bool> skip(n);
  for (size_t s = 0; s < n; ++s)
    // Remote hosts get one message per layer step (the demand one): a
    // speculative read is for local drives only.
    skip[s] = !ready_[s].ok() || (speculative && (failed_[s] || sources_[s]->remote()));
  std::vector<size_t> load(n, 0);
  std::vector<std::vector<size_t>> items(n);
  // The same layer's previous demand request (the other sequence group of
  // this step): its remote experts stay where they were just read.
  const bool same_step = !speculative && r.layer == last_layer_;
  std::vector<std::pair<int64_t, size_t>> routes;
  for (size_t i = 0; i < r.work.size(); ++i) {
    const int64_t expert = r.work[i].expert;
    int s = route(r.layer, expert, load, skip);
    bool sticky = false;
    if (same_step && s >= 0 && sources_[static_cast<size_t>(s)]->remote()) {
      const auto it = std::lower_bound(last_routes_.begin(), last_routes_.end(),
                                       std::pair<int64_t, size_t>{expert, 0});
      if (it != last_routes_.end() && it->first == expert && !skip[it->second] &&
          sources_[it->second]->owns(r.layer, expert)) {
        s = static_cast<int>(it->second);
        sticky = true;
      }
    }
    if (s < 0) {
      if (speculative) continue;
      for (auto& v : index_of_) v.clear();
      return no_owner(expert);
    }
    items[static_cast<size_t>(s)].push_back(i);
    if (!sticky) ++load[static_cast<size_t>(s)];
    routes.push_back({expert, static_cast<size_t>(s)});
  }
  if (!speculative) {
    last_layer_ = r.layer;
    std::sort(routes.begin(), routes.end());  // by expert (distinct in a request)
    last_routes_ = std::move(routes);
  }
  // Remote hosts first: their work travels while local experts compute.
  for (const bool remote_pass : {true, false})
    for (size_t s = 0; s < n; ++s) {
      if (sources_[s]->remote() != remote_pass || skip[s]) continue;
      // Every usable source gets a demand request, empty or not: it replaces
      // what that source had in flight.
      if (items[s].empty() && speculative) continue;
      if (speculative) {
        experts::ExpertRequest part;
        part.layer = r.layer;
        part.priority = r.priority;
        part.activations = r.activations;
        for (size_t i : items[s]) part.work.push_back(r.work[i]);
        sources_[s]->submit(part).IgnoreError();  // a prefetch that fails changes nothing
        continue;
      }
      if (Status st = submit_to(s, items[s]); !st.ok()) {
        if (r.priority == experts::ExpertPriority::kSpeculative) continue;
        if (st.code() == absl::StatusCode::kUnavailable && sources_[s]->remote()) {
          K3_RETURN_IF_ERROR(reissue(s, st));
          continue;
        }
        return st;
      }
    }
  return absl::OkStatus();
}

Status RoutingSource::reissue(size_t s, const Status& error) {
  failed_[s] = true;
  const size_t n = sources_.size();
  std::vector<size_t> pending;
  for (size_t j = 0; j < index_of_[s].size(); ++j)
    if (!done_[s][j]) pending.push_back(index_of_[s][j]);
  index_of_[s].clear();
  done_[s].clear();
  if (pending.empty()) return absl::OkStatus();
  std::vector<bool> skip(n);
  std::vector<size_t> load(n, 0);
  std::vector<std::vector<size_t>> items(n);
  for (size_t t = 0; t < n; ++t) {
    skip[t] = failed_[t] || !ready_[t].ok();
    for (size_t j = 0; j < index_of_[t].size(); ++j)
      if (!done_[t][j]) items[t].push_back(index_of_[t][j]);
    load[t] = items[t].size();
  }
  std::vector<bool> grew(n, false);
  for (size_t i : pending) {
    const int t = route(req_.layer, req_.work[i].expert, load, skip);
    if (t < 0)
      return absl::Status(error.code(), cat(msg(error), "; no replica serves expert ",
                                            req_.work[i].expert, " of layer ", req_.layer));
    items[static_cast<size_t>(t)].push_back(i);
    ++load[static_cast<size_t>(t)];
    grew[static_cast<size_t>(t)] = true;
  }
  base::logger("engined")->warn("{}: re-issuing {} experts of layer {} on replicas", msg(error),
                                pending.size(), req_.layer);
  reissued_ += pending.size();
  for (size_t t = 0; t < n; ++t) {
    if (!grew[t]) continue;
    // The target's own unfinished work goes again with the new: a submit
    // replaces what it had in flight.
    if (Status st = submit_to(t, items[t]); !st.ok()) {
      if (st.code() == absl::StatusCode::kUnavailable && sources_[t]->remote()) {
        K3_RETURN_IF_ERROR(reissue(t, st));
        continue;
      }
      return st;
    }
  }
  return absl::OkStatus();
}

StatusOr<std::optional<experts::ExpertCompletion>> RoutingSource::poll_source(size_t s,
                                                                              int timeout_ms) {
  StatusOr<std::optional<experts::ExpertCompletion>> c = sources_[s]->poll(timeout_ms);
  if (!c.ok()) {
    if (c.status().code() != absl::StatusCode::kUnavailable || !sources_[s]->remote() ||
        req_.priority != experts::ExpertPriority::kDemand)
      return c.status();
    K3_RETURN_IF_ERROR(reissue(s, c.status()));
    return std::optional<experts::ExpertCompletion>();
  }
  if (*c) {
    rr_ = s + 1;
    const size_t j = (*c)->index;
    done_[s][j] = true;
    (*c)->index = index_of_[s][j];
  }
  return c;
}

StatusOr<std::optional<experts::ExpertCompletion>> RoutingSource::poll(int timeout_ms) {
  if (outstanding() == 0) return absl::FailedPreconditionError("no expert completion is due");
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  const size_t n = sources_.size();
  for (;;) {
    // Whatever has arrived anywhere, round robin.
    size_t busy = 0, last_busy = 0;
    for (size_t k = 0; k < n; ++k) {
      const size_t s = (rr_ + k) % n;
      if (sources_[s]->outstanding() == 0) continue;
      ++busy;
      last_busy = s;
      K3_ASSIGN_OR_RETURN(std::optional<experts::ExpertCompletion> c, poll_source(s, 0));
      if (c) return c;
    }
    if (busy == 0) return absl::FailedPreconditionError("no expert completion is due");
    if (timeout_ms == 0 || (timeout_ms > 0 && Clock::now() >= deadline))
      return std::optional<experts::ExpertCompletion>();
    // Wait on one source: as long as the caller allows when it is the only
    // one busy, else 1 ms before looking at the others again.
    int wait_ms = busy > 1 ? 1 : timeout_ms;
    if (timeout_ms > 0)
      wait_ms = std::min<int>(
          wait_ms < 0 ? timeout_ms : wait_ms,
          static_cast<int>(
              std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
                  .count()) +
              1);
    if (sources_[last_busy]->outstanding() == 0) continue;
    K3_ASSIGN_OR_RETURN(std::optional<experts::ExpertCompletion> c,
                        poll_source(last_busy, wait_ms));
    if (c) return c;
  }
}

void RoutingSource::remote_host_stats(std::vector<experts::RemoteHostStats>* out) const {
  for (const auto& s : sources_) s->remote_host_stats(out);
}

}  // namespace k3::engined
