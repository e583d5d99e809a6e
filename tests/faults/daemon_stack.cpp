#include "tests/faults/daemon_stack.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace k3::faults_test {

const char* daemon_name(Daemon d) {
  switch (d) {
    case Daemon::kExpertd:
      return "expertd";
    case Daemon::kEngined:
      return "engined";
    case Daemon::kGateway:
      return "gateway";
  }
  return "?";
}

int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

DaemonStack::DaemonStack(const std::string& dir, const StackOptions& opt) : opt_(opt), dir_(dir) {
  if (opt_.model.empty()) opt_.model = testing::tiny_model_dir();
  if (opt_.expertd_model.empty()) opt_.expertd_model = opt_.model;
  segment_ = "k3faults-" + std::to_string(::getpid());
  http_port_ = free_tcp_port();
  grpc_port_ = free_tcp_port();
  nlohmann::json topo = {{"expertd", {{{"name", "d0"}, {"address", "unix:" + expertd_socket()}}}}};
  testing::write_file(dir_ + "/topology.json", topo.dump());
}

DaemonStack::~DaemonStack() {
  for (auto& p : procs_) p.reset();  // SIGKILL what still runs
  ::unlink(("/dev/shm/" + segment_).c_str());
}

std::string DaemonStack::log_path(Daemon d, int lifetime) const {
  return dir_ + "/" + daemon_name(d) + "." + std::to_string(lifetime) + ".log";
}

std::vector<std::string> DaemonStack::argv(Daemon d) const {
  const std::string bin = testing::bin_dir();
  std::vector<std::string> a;
  switch (d) {
    case Daemon::kExpertd:
      a = {
          bin + "/expertd", "--model", opt_.expertd_model, "--listen",   "unix:" + expertd_socket(),
          "--segment",      segment_,  "--cache-gb",       opt_.cache_gb};
      a.insert(a.end(), opt_.expertd_extra.begin(), opt_.expertd_extra.end());
      break;
    case Daemon::kEngined:
      a = {bin + "/engined", "serve",
           "--model",        opt_.model,
           "--listen",       "unix:" + engined_socket(),
           "--sessions",     std::to_string(opt_.sessions),
           "--threads",      "2",
           "--chunk",        "16",
           "--expertd",      segment_};
      a.insert(a.end(), opt_.engined_extra.begin(), opt_.engined_extra.end());
      break;
    case Daemon::kGateway:
      a = {bin + "/gateway",
           "--model",
           opt_.model,
           "--engined",
           "unix:" + engined_socket(),
           "--topology",
           dir_ + "/topology.json",
           "--http-listen",
           "127.0.0.1:" + std::to_string(http_port_),
           "--grpc-listen",
           "127.0.0.1:" + std::to_string(grpc_port_),
           "--ready-file",
           dir_ + "/gateway.ready",
           "--poll-seconds",
           "0.2",
           "--max-queue",
           std::to_string(opt_.max_queue)};
      a.insert(a.end(), opt_.gateway_extra.begin(), opt_.gateway_extra.end());
      break;
  }
  return a;
}

void DaemonStack::start(Daemon d) {
  const size_t i = static_cast<size_t>(d);
  if (running(d)) return;
  procs_[i] = std::make_unique<testing::Process>(argv(d), log_path(d, lifetimes_[i]));
  ++lifetimes_[i];
}

bool DaemonStack::start_all(double seconds) {
  for (Daemon d : kDaemons) start(d);
  return wait_healthy(seconds);
}

bool DaemonStack::running(Daemon d) {
  auto& p = procs_[static_cast<size_t>(d)];
  return p != nullptr && p->wait_exit(0) < 0;
}

int DaemonStack::signal(Daemon d, int sig) {
  auto& p = procs_[static_cast<size_t>(d)];
  if (p == nullptr) return -1;
  return p->stop(sig);
}

std::array<int, 3> DaemonStack::stop_all() {
  std::array<int, 3> codes{-1, -1, -1};
  for (Daemon d : {Daemon::kGateway, Daemon::kEngined, Daemon::kExpertd}) {
    const bool was = running(d);
    const int rc = signal(d, SIGTERM);
    codes[static_cast<size_t>(d)] = was ? rc : -1;
  }
  return codes;
}

bool DaemonStack::wait_healthy(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    auto c = client(5);
    c.set_connection_timeout(1, 0);
    auto r = c.Get("/health");
    if (r && r->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

int DaemonStack::pid(Daemon d) const {
  const auto& p = procs_[static_cast<size_t>(d)];
  return p == nullptr ? -1 : p->pid();
}

long DaemonStack::rss_kb(Daemon d) const {
  const int p = pid(d);
  if (p <= 0) return 0;
  std::ifstream f("/proc/" + std::to_string(p) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

httplib::Client DaemonStack::client(int read_timeout_s) const {
  httplib::Client c("127.0.0.1", http_port_);
  c.set_read_timeout(read_timeout_s, 0);
  c.set_connection_timeout(5, 0);
  return c;
}

std::string DaemonStack::logs(size_t bytes) const {
  std::ostringstream out;
  for (Daemon d : kDaemons)
    for (int l = 0; l < lifetimes_[static_cast<size_t>(d)]; ++l) {
      const std::string s = testing::read_file(log_path(d, l));
      out << "--- " << daemon_name(d) << " lifetime " << l << "\n"
          << (s.size() > bytes ? s.substr(s.size() - bytes) : s) << "\n";
    }
  return out.str();
}

}  // namespace k3::faults_test
