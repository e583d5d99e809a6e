#include "engined/experts/source_factory.h"

#include "engined/experts/pread_source.h"
#include "engined/experts/remote_source.h"
#include "engined/experts/routing_source.h"
#include "shared/experts/shm_source.h"

namespace k3::engined {

StatusOr<std::unique_ptr<experts::ExpertSource>> make_expert_source(const ExpertSourceOptions& opt,
                                                                    const Model& model) {
  const experts::ExpertShape shape = experts::ExpertShape::of(model.config());
  if (opt.expertd_segments.empty() && opt.remote_hosts.empty()) {
    PreadSourceOptions po;
    po.cache_bytes = opt.cache_bytes;
    po.threads = opt.loader_threads;
    po.direct = opt.direct_io;
    po.manifest = opt.manifest;
    K3_ASSIGN_OR_RETURN(auto src, PreadExpertSource::open(model.model_dir(), model.extra_dirs(),
                                                          model.config(), po));
    return std::unique_ptr<experts::ExpertSource>(std::move(src));
  }
  std::vector<std::unique_ptr<experts::ExpertSource>> shm;  // and then the remote hosts
  for (const std::string& seg : opt.expertd_segments) {
    experts::ShmSourceOptions so;
    so.segment = seg;
    so.fingerprint = model.fingerprint();
    K3_ASSIGN_OR_RETURN(auto src, experts::ShmExpertSource::create(so, shape));
    shm.push_back(std::move(src));
  }
  for (const RemoteHost& h : opt.remote_hosts) {
    RemoteSourceOptions ro;
    ro.name = h.name;
    ro.address = h.address;
    ro.tls = h.tls;
    ro.insecure = h.insecure;
    ro.fingerprint = model.fingerprint();
    ro.deadline_ms = opt.remote_deadline_ms;
    ro.min_mbps = opt.remote_min_mbps;
    ro.bytes_mode = opt.remote_bytes;
    ro.manifest = opt.manifest;
    if (!h.token_file.empty()) {
      K3_ASSIGN_OR_RETURN(ro.token, rpc::read_token_file(h.token_file));
    }
    K3_ASSIGN_OR_RETURN(auto src, RemoteExpertSource::create(ro, shape));
    shm.push_back(std::move(src));
  }
  if (shm.size() == 1 && opt.remote_hosts.empty()) return std::move(shm.front());
  K3_ASSIGN_OR_RETURN(auto placement, RoutingSource::create(std::move(shm)));
  return std::unique_ptr<experts::ExpertSource>(std::move(placement));
}

}  // namespace k3::engined

namespace k3::engined {

Status parse_remote_flags(const std::vector<std::string>& remote_expertd, ExpertSourceOptions* o) {
  o->remote_hosts.clear();
  for (const std::string& v : remote_expertd) {
    K3_ASSIGN_OR_RETURN(auto nv, parse_remote_expertd(v));
    for (const RemoteHost& h : o->remote_hosts)
      if (h.name == nv.first)
        return absl::InvalidArgumentError(
            cat("--remote-expertd: name '", nv.first, "' given twice"));
    RemoteHost h;
    h.name = nv.first;
    h.address = nv.second;
    h.tls = o->remote_tls;
    h.token_file = o->remote_token_file;
    h.insecure = o->insecure_remote;
    o->remote_hosts.push_back(std::move(h));
  }
  const bool tls =
      !o->remote_tls.ca.empty() || !o->remote_tls.cert.empty() || !o->remote_tls.key.empty();
  if (o->remote_hosts.empty()) {
    if (tls)
      return absl::InvalidArgumentError("--tls-ca/--tls-cert/--tls-key need --remote-expertd");
    if (!o->remote_token_file.empty())
      return absl::InvalidArgumentError("--auth-token-file needs --remote-expertd");
    if (o->insecure_remote)
      return absl::InvalidArgumentError("--insecure-remote needs --remote-expertd");
    return absl::OkStatus();
  }
  if (o->insecure_remote && tls)
    return absl::InvalidArgumentError("--insecure-remote and --tls-* exclude each other");
  if (!o->insecure_remote && o->remote_tls.ca.empty())
    return absl::InvalidArgumentError(
        "--remote-expertd needs --tls-ca (the CA of the hosts' certificates), or "
        "--insecure-remote for plaintext");
  if (!o->insecure_remote && o->remote_token_file.empty())
    return absl::InvalidArgumentError(
        "--remote-expertd needs --auth-token-file (or --insecure-remote)");
  if (o->remote_tls.cert.empty() != o->remote_tls.key.empty())
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  if (o->remote_deadline_ms < 1 || o->remote_deadline_ms > 600000)
    return absl::InvalidArgumentError("--remote-deadline-ms must be in [1, 600000]");
  if (!(o->remote_min_mbps >= 1 && o->remote_min_mbps <= 1e6))
    return absl::InvalidArgumentError("--remote-min-mbps must be in [1, 1000000]");
  if (!o->remote_token_file.empty()) {
    K3_RETURN_IF_ERROR(rpc::read_token_file(o->remote_token_file).status());
  }
  return absl::OkStatus();
}

Status check_remote_host(const RemoteHost& h, std::string_view where) {
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(cat(where, " '", h.name, "': ", what));
  };
  if (h.name.empty()) return absl::InvalidArgumentError(cat(where, ": a host without a name"));
  if (auto nv = parse_remote_expertd(cat(h.name, "=", h.address)); !nv.ok() || nv->first != h.name)
    return bad(cat("address '", h.address, "' is not HOST:PORT (port 1..65535)"));
  const bool tls = !h.tls.ca.empty() || !h.tls.cert.empty() || !h.tls.key.empty();
  if (h.insecure && tls) return bad("insecure and tls_* exclude each other");
  if (!h.insecure && h.tls.ca.empty()) return bad("tls_ca is required (or insecure)");
  if (!h.insecure && h.token_file.empty()) return bad("auth_token_file is required (or insecure)");
  if (h.tls.cert.empty() != h.tls.key.empty()) return bad("tls_cert and tls_key go together");
  if (!h.token_file.empty()) {
    if (auto t = rpc::read_token_file(h.token_file); !t.ok())
      return bad(cat("auth_token_file: ", msg(t.status())));
  }
  return absl::OkStatus();
}

}  // namespace k3::engined
