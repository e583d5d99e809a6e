// The topology file (gateway --topology FILE): the expertd instances of the
// deployment, as JSON. Untrusted input: every field is checked and the first
// problem is refused naming the file, the entry and the field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "shared/base/status.h"

namespace k3::gateway {

struct ExpertdEntry {
  std::string name;
  std::string address;  // its control service, e.g. unix:/run/k3serve/expertd.sock
  // Optional: the segment it must report (a /dev/shm name, or DIR/NAME for an
  // expertd run with --segment-dir DIR); an instance reporting another is
  // not used (a mix-up of sockets and drives), its error naming both.
  std::string segment;
};

// Parses {"expertd": [{"name": ..., "address": ..., "segment": ...}, ...]}
// ("name" defaults to the address, "segment" optional), naming the problem
// (file, entry, field) when it is malformed.
StatusOr<std::vector<ExpertdEntry>> parse_topology(std::string_view json_text,
                                                   std::string_view origin);

}  // namespace k3::gateway
