#include "engined/experts/placement_source.h"

#include <algorithm>
#include <chrono>

namespace k3::engine {

using Clock = std::chrono::steady_clock;

PlacementSource::PlacementSource(std::vector<std::unique_ptr<ExpertSource>> sources)
    : sources_(std::move(sources)), index_of_(sources_.size()) {}

StatusOr<std::unique_ptr<PlacementSource>> PlacementSource::create(
    std::vector<std::unique_ptr<ExpertSource>> sources) {
  if (sources.empty()) return absl::InvalidArgumentError("a placement needs at least one source");
  for (const auto& s : sources)
    if (s == nullptr) return absl::InvalidArgumentError("a placement source is null");
  return std::unique_ptr<PlacementSource>(new PlacementSource(std::move(sources)));
}

Status PlacementSource::prepare() {
  for (auto& s : sources_) K3_RETURN_IF_ERROR(s->prepare());
  return absl::OkStatus();
}

int PlacementSource::route(int64_t layer, int64_t expert) const {
  for (size_t s = 0; s < sources_.size(); ++s)
    if (sources_[s]->owns(layer, expert)) return static_cast<int>(s);
  return -1;
}

bool PlacementSource::owns(int64_t layer, int64_t expert) const {
  return route(layer, expert) >= 0;
}

size_t PlacementSource::outstanding() const {
  size_t n = 0;
  for (const auto& s : sources_) n += s->outstanding();
  return n;
}

ExpertSourceStats PlacementSource::stats() const {
  ExpertSourceStats t;
  for (const auto& src : sources_) {
    const ExpertSourceStats s = src->stats();
    t.requests += s.requests;
    t.hits += s.hits;
    t.reads += s.reads;
    t.bytes_read += s.bytes_read;
    t.speculative += s.speculative;
    t.speculative_reads += s.speculative_reads;
    t.speculative_bytes += s.speculative_bytes;
    t.speculative_hits += s.speculative_hits;
    t.wait_seconds += s.wait_seconds;
    t.compute_seconds += s.compute_seconds;
  }
  return t;
}

Status PlacementSource::submit(const ExpertRequest& r) {
  K3_RETURN_IF_ERROR(prepare());
  const bool speculative = r.priority == ExpertPriority::kSpeculative;
  std::vector<ExpertRequest> parts(sources_.size());
  // A speculative request goes out beside the demand one in flight, whose
  // index map stays.
  if (!speculative)
    for (auto& v : index_of_) v.clear();
  for (size_t i = 0; i < r.work.size(); ++i) {
    const int s = route(r.layer, r.work[i].expert);
    if (s < 0) {
      if (speculative) continue;
      return absl::NotFoundError(
          cat("no attached expertd serves expert ", r.work[i].expert, " of layer ", r.layer));
    }
    parts[s].work.push_back(r.work[i]);
    if (!speculative) index_of_[s].push_back(i);
  }
  for (size_t s = 0; s < sources_.size(); ++s) {
    parts[s].layer = r.layer;
    parts[s].priority = r.priority;
    parts[s].activations = r.activations;
    // Every source gets a demand request, empty or not: it replaces what
    // that source had in flight.
    if (parts[s].work.empty() && r.priority == ExpertPriority::kSpeculative) continue;
    K3_RETURN_IF_ERROR(sources_[s]->submit(parts[s]));
  }
  return absl::OkStatus();
}

StatusOr<std::optional<ExpertCompletion>> PlacementSource::poll(int timeout_ms) {
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
      K3_ASSIGN_OR_RETURN(std::optional<ExpertCompletion> c, sources_[s]->poll(0));
      if (c) {
        rr_ = s + 1;
        c->index = index_of_[s][c->index];
        return c;
      }
    }
    if (busy == 0) return absl::FailedPreconditionError("no expert completion is due");
    if (timeout_ms == 0 || (timeout_ms > 0 && Clock::now() >= deadline))
      return std::optional<ExpertCompletion>();
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
    K3_ASSIGN_OR_RETURN(std::optional<ExpertCompletion> c, sources_[last_busy]->poll(wait_ms));
    if (c) {
      rr_ = last_busy + 1;
      c->index = index_of_[last_busy][c->index];
      return c;
    }
  }
}

}  // namespace k3::engine
