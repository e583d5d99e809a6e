// The three daemons of one host (expertd over shared memory, engined serve,
// gateway) as real processes that a test starts, kills and restarts one by
// one, as systemd would: each keeps its addresses across restarts (fixed
// unix sockets, a fixed HTTP port), and each lifetime logs to its own file.
#pragma once

#include <httplib.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace k3::faults_test {

enum class Daemon { kExpertd = 0, kEngined = 1, kGateway = 2 };
inline constexpr std::array<Daemon, 3> kDaemons = {Daemon::kExpertd, Daemon::kEngined,
                                                   Daemon::kGateway};
const char* daemon_name(Daemon d);

struct StackOptions {
  std::string model;          // engined's and the gateway's (default: the tiny model)
  std::string expertd_model;  // the directory expertd reads (default: model)
  std::string cache_gb = "0.05";
  int sessions = 2;
  int max_queue = 64;
  std::vector<std::string> expertd_extra, engined_extra, gateway_extra;
};

// A TCP port on 127.0.0.1 nobody listens on now.
int free_tcp_port();

class DaemonStack {
 public:
  // `dir`: sockets, logs, the ready file and the topology (kept short: unix
  // socket paths hold 107 bytes).
  DaemonStack(const std::string& dir, const StackOptions& opt);
  // SIGKILLs what still runs and removes the segment.
  ~DaemonStack();
  DaemonStack(const DaemonStack&) = delete;
  DaemonStack& operator=(const DaemonStack&) = delete;

  // Starts one daemon (a new lifetime) unless it runs.
  void start(Daemon d);
  // expertd, engined, gateway in that order, then waits for /health 200.
  bool start_all(double seconds = 120);
  // Whether the daemon's process runs (reaps it if it exited).
  bool running(Daemon d);
  // Sends `sig`, waits for the exit and returns the exit code (128+signal).
  int signal(Daemon d, int sig);
  // SIGTERM in the order gateway, engined, expertd; the exit codes in
  // kDaemons order (-1: was not running).
  std::array<int, 3> stop_all();
  // /health answers 200 within `seconds`.
  bool wait_healthy(double seconds);

  int pid(Daemon d) const;
  int lifetimes(Daemon d) const { return lifetimes_[static_cast<size_t>(d)]; }
  // Resident set of a running daemon, kB (0 when not running).
  long rss_kb(Daemon d) const;

  httplib::Client client(int read_timeout_s = 120) const;
  int http_port() const { return http_port_; }
  const std::string& segment() const { return segment_; }
  const std::string& dir() const { return dir_; }
  std::string expertd_socket() const { return dir_ + "/expertd.sock"; }
  std::string engined_socket() const { return dir_ + "/engined.sock"; }
  // The last `bytes` of every lifetime's log of each daemon.
  std::string logs(size_t bytes = 4000) const;
  std::string log_path(Daemon d, int lifetime) const;

 private:
  std::vector<std::string> argv(Daemon d) const;

  StackOptions opt_;
  std::string dir_, segment_;
  int http_port_ = 0, grpc_port_ = 0;
  std::array<std::unique_ptr<testing::Process>, 3> procs_;
  std::array<int, 3> lifetimes_{};
};

}  // namespace k3::faults_test
