#include "engined/serving/placement_swap.h"

#include <algorithm>

#include <absl/strings/str_join.h>

#include "shared/base/log.h"

namespace k3::engined {

using k3::experts::ExpertSource;

PlacementSwap::PlacementSwap(Placement initial) : in_use_(std::move(initial)) {}

Status PlacementSwap::request(Placement p, uint64_t version, const std::function<void()>& wake) {
  const std::vector<RemoteHost>& hosts = p.remote_hosts;
  for (size_t i = 0; i < hosts.size(); ++i) {
    K3_RETURN_IF_ERROR(check_remote_host(hosts[i], cat("placement remote_expertd[", i, "]")));
    for (size_t j = 0; j < i; ++j)
      if (hosts[j].name == hosts[i].name)
        return absl::InvalidArgumentError(
            cat("placement remote_expertd[", i, "]: name '", hosts[i].name, "' given twice"));
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    // The sources decide, not the version: a restarted gateway counts from 1
    // again.
    if (p.segments == in_use_.segments && p.remote_hosts == in_use_.remote_hosts) {
      raise_version(version);
      return absl::OkStatus();
    }
    posted_ = std::move(p);
    pending_ = true;
  }
  wake();
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return !pending_ || closed_; });
  if (status_.ok()) raise_version(version);
  return status_;
}

void PlacementSwap::raise_version(uint64_t version) {
  version_.store(std::max(version_.load(), version));
}

std::optional<Placement> PlacementSwap::posted() const {
  std::lock_guard<std::mutex> lk(mu_);
  if (!pending_) return std::nullopt;
  return posted_;
}

bool PlacementSwap::pending() const {
  std::lock_guard<std::mutex> lk(mu_);
  return pending_;
}

void PlacementSwap::applied(Placement p, Status status) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    status_ = std::move(status);
    pending_ = false;
    in_use_ = std::move(p);
  }
  cv_.notify_all();
}

void PlacementSwap::close() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

std::vector<std::string> PlacementSwap::segments() const {
  std::lock_guard<std::mutex> lk(mu_);
  return in_use_.segments;
}

std::vector<RemoteHost> PlacementSwap::remote_hosts() const {
  std::lock_guard<std::mutex> lk(mu_);
  return in_use_.remote_hosts;
}

Status swap_expert_source(const Placement& p, const Model& model, ExpertSourceOptions* options,
                          std::unique_ptr<ExpertSource>* experts, RemoteHostCounters* hosts) {
  hosts->retire(experts->get());
  options->expertd_segments = p.segments;
  options->remote_hosts = p.remote_hosts;
  experts->reset();
  Status s;
  auto made = make_expert_source(*options, model);
  if (made.ok())
    *experts = std::move(*made);
  else
    s = made.status();
  // A segment that cannot be attached now is retried by the next step.
  if (!s.ok() && (!p.segments.empty() || !p.remote_hosts.empty()))
    s = absl::UnavailableError(msg(s));
  std::string names;
  for (const RemoteHost& h : p.remote_hosts)
    names += cat(names.empty() ? "" : ", ", h.name, "=", h.address);
  base::logger("engined")->info("placement: expertd segments [{}], remote expertd [{}]{}",
                                absl::StrJoin(p.segments, ", "), names,
                                s.ok() ? "" : cat(" (not attached yet: ", msg(s), ")"));
  return s;
}

}  // namespace k3::engined
