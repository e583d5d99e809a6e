#include "tools/k3ctl/bench_hosts_cluster.h"

#include "engined/experts/source_factory.h"
#include "shared/status.h"

namespace k3::tools {

StatusOr<std::unique_ptr<BenchHost>> start_bench_host(const std::string& name,
                                                      const std::string& dir, uint64_t slots,
                                                      double read_limit_mbps, int queue_depth) {
  auto h = std::make_unique<BenchHost>();
  h->name = name;
  K3_ASSIGN_OR_RETURN(h->shards, expertd::ShardSet::open(dir, {}));
  BenchServerOptions bo;
  bo.tag = cat("hosts-", name);
  bo.slots = slots;
  bo.direct = true;
  bo.queue_depth = queue_depth;
  bo.read_limit_mbps = read_limit_mbps;
  K3_ASSIGN_OR_RETURN(h->data, start_bench_server(*h->shards, bo));
  h->control = std::make_unique<expertd::ControlService>(*h->shards, h->data.server.get());
  expertd::RemoteListenerOptions ro;
  ro.listen = "127.0.0.1:0";
  ro.insecure = true;  // loopback inside the benchmark's network namespace
  K3_ASSIGN_OR_RETURN(h->remote,
                      expertd::RemoteListener::start(*h->shards, *h->data.server, *h->control, ro));
  h->control->set_remote(h->remote.get());
  return h;
}

StatusOr<std::unique_ptr<experts::ExpertSource>> bench_hosts_source(
    const std::vector<std::unique_ptr<BenchHost>>& hosts, const engined::Model& m) {
  engined::ExpertSourceOptions xo;
  for (const auto& h : hosts) {
    engined::RemoteHost rh;
    rh.name = h->name;
    rh.address = h->remote->address();
    rh.insecure = true;  // each host's own setting (the flag only fills them)
    xo.remote_hosts.push_back(std::move(rh));
  }
  xo.insecure_remote = true;
  xo.remote_deadline_ms = 300000;  // a read-limited layer step can take seconds
  K3_ASSIGN_OR_RETURN(auto src, engined::make_expert_source(xo, m));
  K3_RETURN_IF_ERROR(src->prepare());
  return src;
}

BenchHostCounts bench_host_counts(const BenchHost& h) {
  const expertd::SegmentServerStats s = h.data.server->stats();
  const expertd::RemoteListenerStats r = h.remote->stats();
  return {s.requests, s.hits, s.bytes_read, r.bytes_in + r.bytes_out, s.direct};
}

}  // namespace k3::tools
