#include "expertd/config.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <tuple>

#include "shared/base/file.h"
#include "shared/base/host_port.h"
#include "shared/rpc/credentials.h"
#include "shared/shm/segment.h"

namespace k3::expertd {

void Config::add_flags(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--config", config_file,
                 "config file: JSON object of flag names to values; flags given here override it");
  app.add_option("--model", model_dir, "model directory (config.json, index)")->required();
  app.add_option("--shard-dir", shard_dirs, "extra shard directory (repeatable)");
  app.add_option("--listen", listen, "control service address (unix:PATH or HOST:PORT)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  app.add_option("--log-format", log_format,
                 "log lines: text (time with its UTC offset, level, component, message) or json "
                 "(one object per line: time, level, daemon, message, request_id)")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--segment", server.segment, "shared-memory segment name (/dev/shm/NAME)");
  app.add_option("--segment-dir", segment_dir,
                 "put the segment in this directory instead of /dev/shm (e.g. a hugetlbfs mount); "
                 "engined's --expertd then takes DIR/NAME");
  app.add_option("--segment-mode", segment_mode,
                 "the segment's mode: 0600 (default: engined runs as the same user) or 0660 "
                 "(engined in the service group maps it read-write)")
      ->check(CLI::IsMember({"0600", "0660"}));
  app.add_option("--cache-gb", cache_gb, "expert slot budget in GB");
  app.add_option("--queue-depth", server.queue_depth, "io_uring reads in flight");
  app.add_option("--read-chunk-kb", server.read_chunk_bytes, "read chunk in KiB")
      ->transform([](std::string s) {
        // KiB as given, bytes inside. Digits only and bounded, so the
        // conversion cannot throw past CLI11 (a bad value is named, exit 105).
        if (s.empty() || s.size() > 7 || s.find_first_not_of("0123456789") != std::string::npos)
          throw CLI::ValidationError(
              "--read-chunk-kb",
              "must be a whole number of KiB (at most 7 digits), not '" + s + "'");
        return std::to_string(std::stoull(s) * 1024);
      })
      ->default_str(std::to_string(server.read_chunk_bytes / 1024));  // in KiB, as given
  app.add_flag("!--no-direct", server.direct, "buffered reads instead of O_DIRECT");
  app.add_option("--first-layer", server.first_layer, "first layer served (0-based)");
  app.add_option("--last-layer", server.last_layer, "last layer served (-1 = the last)");
  app.add_option("--manifest", manifest_file,
                 "integrity manifest (k3ctl manifest): every expert read is checked against it "
                 "(default: none)");
  app.add_option("--read-limit-mbps", server.read_limit_mbps,
                 "benchmarking aid: cap drive reads at this many MB/s (10^6 bytes; token "
                 "bucket; default 0 = no cap)");
  app.add_option("--remote-listen", remote.listen,
                 "serve RemoteExpertService to engined on other hosts on HOST:PORT (TLS: "
                 "--tls-cert/--tls-key, or --insecure-remote)");
  app.add_option("--tls-cert", remote.tls.cert, "PEM certificate of the remote listener");
  app.add_option("--tls-key", remote.tls.key, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", remote.tls.ca,
                 "PEM CA: require client certificates signed by it (mutual TLS)");
  app.add_option("--auth-token-file", auth_token_file,
                 "file holding the shared token every remote call must carry (mode 0600); "
                 "checked on a call's headers before any of its messages is read");
  app.add_flag("--insecure-remote", remote.insecure,
               "plaintext remote listener: no TLS. The token is still checked before a "
               "message is read, but it and the activations cross the network readable: "
               "whoever sees one call can replay the token and is then trusted as engined "
               "is (gRPC buffers such a peer's oversized message whole before refusing it); "
               "without --auth-token-file any peer is. For tests and trusted links only");
  app.add_option("--remote-max-streams-per-peer", remote.limits.max_streams_per_peer,
                 "remote Experts streams one peer (its IP address) may hold at once; more are "
                 "refused RESOURCE_EXHAUSTED (one engined holds 1 per host, 2 for a moment when "
                 "it reconnects or swaps placement)");
  app.add_option("--remote-max-streams", remote.limits.max_streams,
                 cat("remote Experts streams of all peers at once, at most ", kMaxRemoteStreams,
                     ": each takes one of the segment's ", shm::kMaxClients,
                     " client slots, and the others stay for local engined"));
  app.add_option("--remote-idle-timeout-s", remote.limits.idle_timeout_s,
                 "close a remote stream that sent no request for this many seconds, freeing "
                 "its client slot (engined reconnects on its next step); 0 = never");
}

Status Config::validate() {
  if (!shm::valid_segment_name(server.segment))
    return absl::InvalidArgumentError(
        cat("invalid shared-memory segment name '", server.segment,
            "' for --segment ([A-Za-z0-9._-]{1,200}; a directory goes in --segment-dir)"));
  if (!segment_dir.empty()) {
    std::error_code ec;
    if (segment_dir.front() != '/')
      return absl::InvalidArgumentError(
          cat("--segment-dir '", segment_dir, "' must be an absolute path"));
    if (!std::filesystem::is_directory(segment_dir, ec))
      return absl::InvalidArgumentError(cat("--segment-dir ", segment_dir, " is not a directory"));
  }
  server.segment = shm::segment_ref(segment_dir, server.segment);
  if (!shm::valid_segment_ref(server.segment))
    return absl::InvalidArgumentError(
        cat("--segment-dir ", segment_dir, ": the segment path ", server.segment, " is refused"));
  server.segment_mode = segment_mode == "0660" ? 0660 : 0600;
  if (!(cache_gb > 0.0) || cache_gb > 1e5)
    return absl::InvalidArgumentError(cat("--cache-gb ", cache_gb, " is outside (0, 100000]"));
  server.cache_bytes = static_cast<uint64_t>(cache_gb * 1e9);
  if (server.queue_depth < 1 || server.queue_depth > 4096)
    return absl::InvalidArgumentError(
        cat("--queue-depth ", server.queue_depth, " is outside [1, 4096]"));
  if (server.read_chunk_bytes < 4096 || server.read_chunk_bytes % 4096 != 0 ||
      server.read_chunk_bytes > (1u << 30))
    return absl::InvalidArgumentError("--read-chunk-kb must be a multiple of 4 in [4, 1048576]");
  if (!(server.read_limit_mbps >= 0) || server.read_limit_mbps > 1e6)
    return absl::InvalidArgumentError(
        cat("--read-limit-mbps ", server.read_limit_mbps, " is outside [0, 1000000]"));
  if (remote.listen.empty()) {
    for (const auto& [flag, v] :
         {std::pair<const char*, const std::string*>{"--tls-cert", &remote.tls.cert},
          {"--tls-key", &remote.tls.key},
          {"--tls-ca", &remote.tls.ca},
          {"--auth-token-file", &auth_token_file}})
      if (!v->empty()) return absl::InvalidArgumentError(cat(flag, " needs --remote-listen"));
    if (remote.insecure)
      return absl::InvalidArgumentError("--insecure-remote needs --remote-listen");
    const PeerLimitsOptions defaults;
    for (const auto& [flag, v, d] :
         {std::tuple<const char*, int, int>{"--remote-max-streams-per-peer",
                                            remote.limits.max_streams_per_peer,
                                            defaults.max_streams_per_peer},
          {"--remote-max-streams", remote.limits.max_streams, defaults.max_streams},
          {"--remote-idle-timeout-s", remote.limits.idle_timeout_s, defaults.idle_timeout_s}})
      if (v != d) return absl::InvalidArgumentError(cat(flag, " needs --remote-listen"));
    return absl::OkStatus();
  }
  if (remote.listen.rfind("unix:", 0) == 0 || !base::parse_host_port(remote.listen).ok())
    return absl::InvalidArgumentError(
        cat("--remote-listen '", remote.listen, "' must be HOST:PORT"));
  K3_RETURN_IF_ERROR(expertd::validate(remote.limits));
  if (remote.insecure) {
    if (!remote.tls.cert.empty() || !remote.tls.key.empty() || !remote.tls.ca.empty())
      return absl::InvalidArgumentError("--insecure-remote and --tls-* exclude each other");
  } else {
    if (remote.tls.cert.empty() || remote.tls.key.empty())
      return absl::InvalidArgumentError(
          "--remote-listen needs --tls-cert and --tls-key (or --insecure-remote for plaintext)");
    if (auth_token_file.empty())
      return absl::InvalidArgumentError(
          "--remote-listen needs --auth-token-file (or --insecure-remote)");
  }
  if (!auth_token_file.empty()) {
    K3_ASSIGN_OR_RETURN(remote.token, rpc::read_token_file(auth_token_file));
  }
  return absl::OkStatus();
}

std::string Config::summary() const {
  return cat("model=", model_dir, " shard_dirs=", shard_dirs.size(), " listen=", listen,
             " segment=", shm::segment_path(server.segment), " segment_mode=", segment_mode,
             " cache_gb=", cache_gb, " queue_depth=", server.queue_depth,
             " read_chunk=", server.read_chunk_bytes, " direct=", server.direct ? "yes" : "no",
             " layers=", server.first_layer, "..", server.last_layer,
             " manifest=", manifest_file.empty() ? "none" : manifest_file,
             " read_limit_mbps=", server.read_limit_mbps,
             " remote_listen=", remote.listen.empty() ? "none" : remote.listen,
             remote.listen.empty()   ? ""
             : remote.insecure       ? " (PLAINTEXT)"
             : remote.tls.ca.empty() ? " (TLS)"
                                     : " (mutual TLS)",
             " auth_token=", auth_token_file.empty() ? "none" : auth_token_file,
             remote.listen.empty() ? std::string()
                                   : cat(" remote_streams=", remote.limits.max_streams_per_peer,
                                         "/peer,", remote.limits.max_streams, "/all",
                                         " remote_idle_timeout_s=", remote.limits.idle_timeout_s));
}

}  // namespace k3::expertd
