#include "tests/faults/fault_fs.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

namespace k3::faults_test {
namespace {
constexpr long kFuseSuperMagic = 0x65735546;

std::string faultfs_binary() {
  return std::string(K3_TEST_BIN_DIR) + "/faultfs";
}
}  // namespace

std::string FaultFs::unavailable() {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) return "no usable /dev/fuse";
  if (::access("/usr/bin/fusermount3", X_OK) != 0) return "no /usr/bin/fusermount3 (fuse3)";
  if (::access(faultfs_binary().c_str(), X_OK) != 0) return faultfs_binary() + " is not built";
  return "";
}

FaultFs::FaultFs(const std::string& source, const std::string& mountpoint,
                 const std::string& work_dir, bool writable)
    : mountpoint_(mountpoint), faults_(work_dir + "/faults"), log_(work_dir + "/faultfs.log") {
  std::filesystem::create_directories(mountpoint_);
  testing::write_file(faults_, "");
  std::vector<std::string> args = {faultfs_binary(), "--source", source, "--faults", faults_};
  if (writable) args.push_back("--writable");
  args.push_back(mountpoint_);
  args.push_back("-f");
  proc_ = std::make_unique<testing::Process>(args, log_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    struct statfs sf {};
    if (::statfs(mountpoint_.c_str(), &sf) == 0 && sf.f_type == kFuseSuperMagic) {
      mounted_ = true;
      return;
    }
    if (proc_->wait_exit(0) >= 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

FaultFs::~FaultFs() {
  if (mounted_) {
    // Lazy: a daemon a test killed may still hold a file open for a moment.
    testing::run_command({"/usr/bin/fusermount3", "-u", "-z", mountpoint_});
  }
  if (proc_ && proc_->wait_exit(10) < 0) proc_->stop(SIGKILL);
}

void FaultFs::set(const std::string& table) {
  // A new file each time (rename): faultfs sees a new inode, whatever the
  // timestamps' granularity.
  const std::string tmp = faults_ + ".new";
  testing::write_file(tmp, table);
  std::rename(tmp.c_str(), faults_.c_str());
}

size_t FaultFs::injected() const {
  const std::string s = log();
  size_t n = 0;
  for (size_t p = 0; (p = s.find("\nfaultfs: eio ", p)) != std::string::npos; ++p) ++n;
  for (size_t p = 0; (p = s.find("\nfaultfs: short ", p)) != std::string::npos; ++p) ++n;
  return n;
}

}  // namespace k3::faults_test
