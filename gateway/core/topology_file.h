// The topology file (gateway --topology FILE): the expertd instances of the
// deployment, as JSON. Untrusted input: every field is checked and the first
// problem is refused naming the file, the entry and the field.
//
//   {"expertd":        [{"name", "address", "segment"}, ...],
//    "remote_expertd": [{"name", "address", "tls_ca", "tls_cert", "tls_key",
//                        "auth_token_file", "insecure"}, ...]}
//
// "expertd" are the compute node's own instances (shared-memory segments;
// the gateway polls their control sockets). "remote_expertd" are storage
// hosts' instances (expertd --remote-listen), which engined reaches itself:
// the gateway passes them in its placement and engined reads the TLS and
// token files named here on the compute node, connects, and polls their
// health. Replicas need no field: two instances (local or remote) that own
// the same expert, as their Describe bitmaps say, are replicas of it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace k3::gateway {

struct ExpertdEntry {
  std::string name;
  std::string address;  // its control service, e.g. unix:/run/k3serve/expertd.sock
  // Optional: the segment it must report (a /dev/shm name, or DIR/NAME for an
  // expertd run with --segment-dir DIR); an instance reporting another is
  // not used (a mix-up of sockets and drives), its error naming both.
  std::string segment;
};

// A storage host's expertd, as engined's --remote-expertd NAME=HOST:PORT with
// --tls-ca/--tls-cert/--tls-key, --auth-token-file or --insecure-remote.
struct RemoteExpertdEntry {
  std::string name;     // [A-Za-z0-9._:\[\]-]{1,64}, distinct from every other entry's
  std::string address;  // HOST:PORT of its --remote-listen
  // Absolute paths on the compute node (engined reads them). With TLS:
  // tls_ca required, tls_cert + tls_key together (mutual TLS) or neither.
  std::string tls_ca, tls_cert, tls_key;
  std::string auth_token_file;  // required unless insecure
  bool insecure = false;        // plaintext: no tls_* allowed
};

struct TopologyFile {
  std::vector<ExpertdEntry> expertd;
  std::vector<RemoteExpertdEntry> remote_expertd;
};

// Parses the file (either list may be absent, not both; unknown keys are
// refused), naming the problem (file, entry, field) when it is
// malformed. "name" defaults to the address.
StatusOr<TopologyFile> parse_topology(std::string_view json_text, std::string_view origin);

}  // namespace k3::gateway
