#include "gateway/core/topology.h"

#include "shared/base/log.h"
#include "shared/shm/segment.h"

namespace k3::gateway {

namespace v1 = k3serve::v1;

namespace {

// Whether engined's remote hosts (its Stats) are the file's, configured alike.
bool same_hosts(const std::vector<RemoteExpertdEntry>& want, const v1::EngineStatsResponse& have) {
  if (static_cast<int>(want.size()) != have.remote_hosts_size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& w = want[i];
    const auto& h = have.remote_hosts(static_cast<int>(i));
    if (w.name != h.name() || w.address != h.address() || w.tls_ca != h.tls_ca() ||
        w.tls_cert != h.tls_cert() || w.tls_key != h.tls_key() ||
        w.auth_token_file != h.auth_token_file() || w.insecure != h.insecure())
      return false;
  }
  return true;
}

}  // namespace

Topology::Topology(TopologyFile file, EngineClient* engine, double poll_seconds,
                   std::function<void(const v1::EngineDescribeResponse&)> on_engine)
    : entries_(std::move(file.expertd)),
      remote_(std::move(file.remote_expertd)),
      engine_(engine),
      poll_seconds_(poll_seconds),
      on_engine_(std::move(on_engine)) {
  for (const auto& e : entries_) {
    ExpertdState s;
    s.entry = e;
    s.error = "not polled yet";
    states_.push_back(s);
    // One channel per instance for the daemon's life (it reconnects itself).
    stubs_.push_back(v1::ExpertService::NewStub(
        grpc::CreateChannel(e.address, grpc::InsecureChannelCredentials())));
  }
  engine_error_ = "not polled yet";
  thread_ = std::thread([this] { run(); });
}

Topology::~Topology() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<ExpertdState> Topology::snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  return states_;
}

std::string Topology::engine_error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return engine_error_;
}

std::optional<v1::EngineStatsResponse> Topology::engine_stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return engine_stats_;
}

std::optional<BuildInfo> Topology::engine_build() const {
  std::lock_guard<std::mutex> lk(mu_);
  return engine_build_;
}

std::vector<std::string> Topology::placement() const {
  std::lock_guard<std::mutex> lk(mu_);
  return placement_;
}

void Topology::run() {
  for (;;) {
    poll();
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::duration<double>(poll_seconds_), [&] { return stop_; });
    if (stop_) return;
  }
}

void Topology::poll() {
  std::lock_guard<std::mutex> one(poll_mu_);
  auto log = base::logger("gateway");
  std::vector<ExpertdState> states;
  for (size_t i = 0; i < entries_.size(); ++i) {
    ExpertdState s;
    s.entry = entries_[i];
    s.polled = true;
    v1::ExpertService::Stub* stub = stubs_[i].get();
    auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
    grpc::ClientContext c1, c2, c3;
    c1.set_deadline(deadline);
    c2.set_deadline(deadline);
    c3.set_deadline(deadline);
    v1::HealthResponse h;
    v1::DescribeResponse d;
    grpc::Status st = stub->Health(&c1, v1::HealthRequest(), &h);
    if (st.ok()) s.build = {h.version(), h.commit()};
    if (st.ok() && h.status() != v1::HealthResponse::SERVING)
      st = grpc::Status(grpc::StatusCode::UNAVAILABLE, cat("not serving: ", h.detail()));
    if (st.ok()) st = stub->Describe(&c2, v1::DescribeRequest(), &d);
    if (st.ok() && !s.entry.segment.empty() && d.segment() != s.entry.segment)
      st = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        cat("serves segment ", shm::segment_path(d.segment()),
                            ", the topology says ", shm::segment_path(s.entry.segment)));
    if (st.ok()) {
      s.healthy = true;
      s.segment = d.segment();
      for (const auto& l : d.layers()) s.layers.push_back(l.layer());
      stub->Stats(&c3, v1::StatsRequest(), &s.stats);
    } else {
      s.error = st.error_message();
    }
    states.push_back(std::move(s));
  }
  std::vector<std::string> want;
  for (const auto& s : states)
    if (s.healthy) want.push_back(s.segment);

  auto desc = engine_->describe(2000);
  std::string engine_error;
  std::optional<v1::EngineStatsResponse> engine_stats;
  std::optional<BuildInfo> engine_build;
  if (desc.ok()) {
    engine_build = BuildInfo{desc->version(), desc->commit()};
    // Told before it counts as up: admission knows engined's sessions (n's
    // limit) by the time /health first answers 200.
    if (on_engine_) on_engine_(*desc);
    engine_up_.store(true);
    if (auto st = engine_->stats(2000); st.ok()) engine_stats = *st;
    const std::vector<std::string> have(desc->expertd_segments().begin(),
                                        desc->expertd_segments().end());
    // Only a placement with at least one healthy local instance (or, in a
    // topology of remote hosts only, its hosts) is sent: with every local
    // expertd down, engined keeps the last one and fails requests with
    // UNAVAILABLE until an instance is back. engined's Stats say which
    // remote hosts it uses (a restarted engined has its flags' again).
    const bool hosts_differ = engine_stats && !same_hosts(remote_, *engine_stats);
    const bool can_send = entries_.empty() ? !remote_.empty() : !want.empty();
    if (can_send && (want != have || hosts_differ)) {
      v1::Placement p;
      for (const auto& s : want) p.add_expertd_segments(s);
      for (const auto& r : remote_) {
        auto* h = p.add_remote_expertd();
        h->set_name(r.name);
        h->set_address(r.address);
        h->set_tls_ca(r.tls_ca);
        h->set_tls_cert(r.tls_cert);
        h->set_tls_key(r.tls_key);
        h->set_auth_token_file(r.auth_token_file);
        h->set_insecure(r.insecure);
      }
      p.set_version(version_.load() + 1);
      uint64_t acked = 0;
      Status ps = engine_->set_placement(p, 30000, &acked);
      // engined may have counted further under an earlier gateway: follow it.
      version_.store(std::max(version_.load() + 1, acked));
      if (ps.ok()) {
        log->info(
            "placement v{} sent to engined: [{}]{}", version_.load(),
            [&] {
              std::string j;
              for (const auto& s : want) j += (j.empty() ? "" : ", ") + s;
              return j;
            }(),
            [&] {
              std::string j;
              for (const auto& r : remote_) j += cat(", remote ", r.name, "=", r.address);
              return j;
            }());
      } else {
        log->warn("engined refused placement: {}", msg(ps));
      }
    }
  } else {
    engine_up_.store(false);
    engine_error = msg(desc.status());
  }
  std::lock_guard<std::mutex> lk(mu_);
  // A change of health is news; "back" only after it was seen down (the
  // first poll finding it up is the normal start, not a recovery).
  for (size_t i = 0; i < states.size(); ++i) {
    const bool was_down = states_[i].polled && !states_[i].healthy;
    if (states[i].healthy && was_down)
      log->warn("expertd {} is back", states[i].entry.name);
    else if (!states[i].healthy && (states_[i].healthy || !states_[i].polled))
      log->warn("expertd {} is down: {}", states[i].entry.name, states[i].error);
  }
  states_ = std::move(states);
  if (!want.empty()) placement_ = want;
  engine_error_ = engine_error;
  engine_stats_ = engine_stats;
  if (engine_build) engine_build_ = engine_build;
}

}  // namespace k3::gateway
