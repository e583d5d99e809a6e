#include "engined/experts/sources.h"

#include "engined/experts/placement_source.h"
#include "engined/experts/pread_source.h"
#include "engined/experts/remote_source.h"
#include "engined/experts/shm_source.h"

namespace k3::engine {

StatusOr<std::unique_ptr<ExpertSource>> make_expert_source(const ExpertSourceOptions& opt,
                                                           const Model& model) {
  const ExpertShape shape = ExpertShape::of(model.config());
  if (opt.expertd_segments.empty() && opt.remote_hosts.empty()) {
    PreadSourceOptions po;
    po.cache_bytes = opt.cache_bytes;
    po.threads = opt.loader_threads;
    po.direct = opt.direct_io;
    po.manifest = opt.manifest;
    K3_ASSIGN_OR_RETURN(auto src, PreadExpertSource::open(model.model_dir(), model.extra_dirs(),
                                                          model.config(), po));
    return std::unique_ptr<ExpertSource>(std::move(src));
  }
  std::vector<std::unique_ptr<ExpertSource>> shm;  // and then the remote hosts
  for (const std::string& seg : opt.expertd_segments) {
    ShmSourceOptions so;
    so.segment = seg;
    so.fingerprint = model.fingerprint();
    K3_ASSIGN_OR_RETURN(auto src, ShmExpertSource::create(so, shape));
    shm.push_back(std::move(src));
  }
  if (!opt.remote_hosts.empty()) {
    RemoteSourceOptions ro;
    ro.tls = opt.remote_tls;
    ro.insecure = opt.insecure_remote;
    ro.fingerprint = model.fingerprint();
    ro.deadline_ms = opt.remote_deadline_ms;
    ro.bytes_mode = opt.remote_bytes;
    if (!opt.remote_token_file.empty()) {
      K3_ASSIGN_OR_RETURN(ro.token, rpc::read_token_file(opt.remote_token_file));
    }
    for (const RemoteHost& h : opt.remote_hosts) {
      ro.name = h.name;
      ro.address = h.address;
      K3_ASSIGN_OR_RETURN(auto src, RemoteExpertSource::create(ro, shape));
      shm.push_back(std::move(src));
    }
  }
  if (shm.size() == 1 && opt.remote_hosts.empty()) return std::move(shm.front());
  K3_ASSIGN_OR_RETURN(auto placement, PlacementSource::create(std::move(shm)));
  return std::unique_ptr<ExpertSource>(std::move(placement));
}

}  // namespace k3::engine

namespace k3::engine {

Status parse_remote_flags(const std::vector<std::string>& remote_expertd, ExpertSourceOptions* o) {
  o->remote_hosts.clear();
  for (const std::string& v : remote_expertd) {
    K3_ASSIGN_OR_RETURN(auto nv, parse_remote_expertd(v));
    for (const RemoteHost& h : o->remote_hosts)
      if (h.name == nv.first)
        return absl::InvalidArgumentError(
            cat("--remote-expertd: name '", nv.first, "' given twice"));
    o->remote_hosts.push_back({nv.first, nv.second});
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
  if (!o->remote_token_file.empty()) {
    K3_RETURN_IF_ERROR(rpc::read_token_file(o->remote_token_file).status());
  }
  return absl::OkStatus();
}

}  // namespace k3::engine
