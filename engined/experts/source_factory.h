// Builds the expert source an engine process is configured for: the shards
// read in-process (no segments named), one expertd segment, or a placement
// over several. Called by serving/, main and the CLI jobs, never by the model.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engined/model/model.h"
#include "shared/experts/expert_source.h"
#include "shared/rpc/credentials.h"

namespace k3::engined {

// A remote expertd: --remote-expertd NAME=HOST:PORT with the TLS and token
// flags (parse_remote_flags gives every host the same), or an entry of the
// gateway's placement (each its own).
struct RemoteHost {
  std::string name, address;
  rpc::TlsFiles tls;       // ca (+ cert/key: mutual TLS); paths
  std::string token_file;  // the shared token ("" only when insecure)
  bool insecure = false;   // plaintext
  bool operator==(const RemoteHost& o) const {
    return name == o.name && address == o.address && tls.ca == o.tls.ca && tls.cert == o.tls.cert &&
           tls.key == o.tls.key && token_file == o.token_file && insecure == o.insecure;
  }
};

struct ExpertSourceOptions {
  // expertd shared-memory segments to take experts from, in order of
  // preference; empty: read the shards in-process.
  std::vector<std::string> expertd_segments;
  // The in-process reader.
  uint64_t cache_bytes = 1ull << 30;
  int loader_threads = 4;
  bool direct_io = true;
  // --manifest: the in-process reader checks every expert read against it
  // (an expertd checks its own reads with its own --manifest).
  std::shared_ptr<const checkpoint::Manifest> manifest;
  // Remote expertd hosts (remote_source.h), after the segments in the
  // placement; with any, no shard is read in-process. Each carries its own
  // TLS files, token file or plaintext (check_remote_host).
  std::vector<RemoteHost> remote_hosts;
  // The flags parse_remote_flags gives every --remote-expertd host.
  rpc::TlsFiles remote_tls;        // --tls-ca (+ --tls-cert/--tls-key: mutual TLS)
  std::string remote_token_file;   // --auth-token-file
  bool insecure_remote = false;    // --insecure-remote: plaintext
  int remote_deadline_ms = 10000;  // --remote-deadline-ms
  double remote_min_mbps = 50;     // --remote-min-mbps
  bool remote_bytes = false;       // --remote-mode bytes: fetch bytes, compute here
};

// The engined flags of remote hosts, checked: NAME=HOST:PORT values (names
// distinct), TLS files (or --insecure-remote), the token file; a TLS or
// token flag without --remote-expertd is refused, naming it.
Status parse_remote_flags(const std::vector<std::string>& remote_expertd, ExpertSourceOptions* o);

// One host as a placement names it, checked as the flags are: NAME=HOST:PORT
// well formed, TLS (tls.ca, cert and key together) or insecure, a token
// file that reads unless insecure. Errors name `where` and the field.
Status check_remote_host(const RemoteHost& h, std::string_view where);

// For `model`: the in-process reader opens the model's expert shards
// itself; with expertd segments or remote hosts no shard is opened (experts
// come only from the segments and the hosts, never from local files).
StatusOr<std::unique_ptr<experts::ExpertSource>> make_expert_source(const ExpertSourceOptions& opt,
                                                                    const Model& model);

}  // namespace k3::engined
