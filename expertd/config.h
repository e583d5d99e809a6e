// expertd's configuration: one struct, from a config file (JSON) then flags,
// validated, logged as one line at start.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "expertd/remote_listener.h"
#include "expertd/segment_server.h"
#include "shared/status.h"

namespace k3::expertd {

struct Config {
  std::string model_dir;
  std::vector<std::string> shard_dirs;  // extra shard directories
  std::string listen = "unix:/run/k3serve/expertd.sock";
  std::string log_level = "info";
  // --log-format: text or json (shared/base/log_format.h)
  std::string log_format = "text";
  std::string config_file;  // read before parsing (shared/base/config_file.h)
  double cache_gb = 4.0;
  std::string manifest_file;  // --manifest: verify every expert read
  std::string segment_dir;    // --segment-dir: the segment is DIR/NAME ("" = /dev/shm)
  std::string segment_mode = "0600";
  SegmentServerOptions server;
  // --remote-listen and its security (remote_listener.h); the token is read
  // from auth_token_file by validate().
  RemoteListenerOptions remote;
  std::string auth_token_file;

  // Registers the flags on `app` (a --config FILE option reads JSON first).
  void add_flags(CLI::App& app);
  Status validate();
  std::string summary() const;
};

}  // namespace k3::expertd
