// k3ctl doctor as a real process: on this machine, with a /dev/shm too small
// for the cache (a private mount namespace), and against unit files whose
// system-call filter blocks io_uring.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/test_util.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

std::map<std::string, json> checks(const std::string& out) {
  std::map<std::string, json> m;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    json j = json::parse(l);
    m[j["check"].get<std::string>()] = j;
  }
  return m;
}

TEST(Doctor, ChecksThisMachine) {
  TempDir tmp;
  const std::string drive = tmp.file("nvme0");
  fs::create_directory(drive);
  fs::copy_file(testing::tiny_model_dir() + "/model-00001-of-00005.safetensors",
                drive + "/model-00001-of-00005.safetensors");
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "doctor", "--model",
                                 testing::tiny_model_dir(), "--drive", drive, "--json",
                                 "--read-seconds", "0.2", "--units-dir", tmp.path()});
  auto c = checks(r.out);
  for (const char* name : {"cpu kernels", "cores", "ram", "segment dir", "hugepages", "io_uring",
                           "systemd filter", "open files"})
    ASSERT_TRUE(c.count(name)) << name << "\n" << r.out;
  const std::string drive_check = "drive " + drive;
  ASSERT_TRUE(c.count(drive_check)) << r.out;
  EXPECT_NE(c[drive_check]["detail"].get<std::string>().find("MB/s"), std::string::npos)
      << c[drive_check];
  EXPECT_NE(c["ram"]["detail"].get<std::string>().find("dense part"), std::string::npos);
  bool any_fail = false;
  for (auto& [k, v] : c) {
    EXPECT_TRUE(v["status"] == "ok" || v["status"] == "warn" || v["status"] == "fail");
    any_fail |= v["status"] == "fail";
    if (v["status"] != "ok") EXPECT_TRUE(v.contains("fix")) << v;
  }
  EXPECT_EQ(r.exit_code, any_fail ? 1 : 0) << r.out;
}

// A repacked container is sized from what it stores.
TEST(Doctor, SizesRamFromAContainer) {
  TempDir tmp;
  const std::string cont = tmp.file("c");
  ASSERT_EQ(testing::run_command({testing::bin_dir() + "/k3ctl", "repack", "--model",
                                  testing::tiny_model_dir(), "--out", cont, "--dense-only"})
                .exit_code,
            0);
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "doctor", "--json", "--model", cont,
                                 "--units-dir", tmp.path()});
  const std::string detail = checks(r.out)["ram"]["detail"].get<std::string>();
  EXPECT_NE(detail.find("the container's 4/8/8 bits"), std::string::npos) << detail;
  EXPECT_NE(detail.find("--mmap"), std::string::npos) << detail;
}

TEST(Doctor, ASegmentDirTooSmallForTheCacheFails) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a private mount namespace";
  const std::string cmd = "mount -t tmpfs -o size=16m tmpfs /dev/shm && exec " +
                          testing::bin_dir() + "/k3ctl doctor --json --cache-gb 1";
  auto r = testing::run_command({"/usr/bin/unshare", "-m", "/bin/sh", "-c", cmd});
  if (r.exit_code != 0 && r.out.empty()) GTEST_SKIP() << "cannot make a mount namespace: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  auto c = checks(r.out);
  ASSERT_TRUE(c.count("segment dir")) << r.out;
  EXPECT_EQ(c["segment dir"]["status"], "fail");
  EXPECT_NE(c["segment dir"]["detail"].get<std::string>().find("does not fit"), std::string::npos);
  EXPECT_NE(c["segment dir"]["fix"].get<std::string>().find("SIGBUS"), std::string::npos);
}

TEST(Doctor, AUnitFilterWithoutIoUringFails) {
  TempDir tmp;
  testing::write_file(tmp.file("k3serve-expertd@.service"),
                      "[Service]\nExecStart=/usr/bin/expertd\nSystemCallFilter=@system-service\n");
  auto r = testing::run_command(
      {testing::bin_dir() + "/k3ctl", "doctor", "--json", "--units-dir", tmp.path()});
  EXPECT_EQ(r.exit_code, 1);
  auto c = checks(r.out);
  EXPECT_EQ(c["systemd filter"]["status"], "fail") << r.out;
  // The shipped unit passes.
  fs::copy_file(testing::source_dir() + "/deploy/systemd/k3serve-expertd@.service",
                tmp.file("k3serve-expertd@.service"), fs::copy_options::overwrite_existing);
  r = testing::run_command(
      {testing::bin_dir() + "/k3ctl", "doctor", "--json", "--units-dir", tmp.path()});
  EXPECT_EQ(checks(r.out)["systemd filter"]["status"], "ok") << r.out;
}

// Inside a container RAM is the cgroup's limit: a fake cgroup tree (v2 layout
// at this process's own cgroup path) with a limit far below the tiny model's
// dense part fails the ram check and names the file.
TEST(Doctor, SizesRamFromTheCgroupLimit) {
  std::ifstream self("/proc/self/cgroup");
  std::string path;
  for (std::string line; std::getline(self, line);)
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  if (path.empty()) GTEST_SKIP() << "no cgroup v2 line in /proc/self/cgroup";
  TempDir tmp;
  const fs::path dir = fs::path(tmp.file("cgroup")) / fs::path(path).relative_path();
  fs::create_directories(dir);
  testing::write_file((dir / "memory.max").string(), "1000000\n");
  testing::write_file((dir / "memory.current").string(), "400000\n");
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "doctor", "--json", "--model",
                                 testing::tiny_model_dir(), "--units-dir", tmp.path(),
                                 "--cgroup-root", tmp.file("cgroup")});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  auto c = checks(r.out);
  EXPECT_EQ(c["ram"]["status"], "fail") << r.out;
  const std::string detail = c["ram"]["detail"].get<std::string>();
  EXPECT_NE(detail.find("0.00 GB available of 0.00 GB (the cgroup limit, "), std::string::npos)
      << detail;
  EXPECT_NE(detail.find("memory.max"), std::string::npos) << detail;
  EXPECT_NE(c["ram"]["fix"].get<std::string>().find("container's memory limit"), std::string::npos);

  // "max" is no limit: the machine's RAM again.
  testing::write_file((dir / "memory.max").string(), "max\n");
  r = testing::run_command({testing::bin_dir() + "/k3ctl", "doctor", "--json", "--units-dir",
                            tmp.path(), "--cgroup-root", tmp.file("cgroup")});
  EXPECT_EQ(checks(r.out)["ram"]["detail"].get<std::string>().find("cgroup"), std::string::npos)
      << r.out;
}

// Drop-ins count: one that denies io_uring fails; one that resets the filter
// (an empty SystemCallFilter=) before @system-service alone fails too.
TEST(Doctor, UnitDropInsAreReadWithSystemdsRules) {
  TempDir tmp;
  const std::string unit = tmp.file("k3serve-expertd@.service");
  fs::copy_file(testing::source_dir() + "/deploy/systemd/k3serve-expertd@.service", unit);
  fs::create_directory(unit + ".d");
  auto status = [&] {
    auto r = testing::run_command(
        {testing::bin_dir() + "/k3ctl", "doctor", "--json", "--units-dir", tmp.path()});
    return checks(r.out)["systemd filter"];
  };
  EXPECT_EQ(status()["status"], "ok");
  testing::write_file(unit + ".d/50-deny.conf",
                      "[Service]\nSystemCallFilter=~io_uring_setup io_uring_enter\n");
  json s = status();
  EXPECT_EQ(s["status"], "fail") << s;
  EXPECT_NE(s["detail"].get<std::string>().find("denies io_uring"), std::string::npos) << s;
  fs::remove(unit + ".d/50-deny.conf");
  testing::write_file(unit + ".d/60-reset.conf",
                      "[Service]\nSystemCallFilter=\nSystemCallFilter=@system-service\n");
  s = status();
  EXPECT_EQ(s["status"], "fail") << s;
  EXPECT_NE(s["detail"].get<std::string>().find("without io_uring"), std::string::npos) << s;
  testing::write_file(unit + ".d/70-uring.conf",
                      "[Service]\nSystemCallFilter=io_uring_setup io_uring_enter "
                      "io_uring_register\n");
  EXPECT_EQ(status()["status"], "ok");
}

}  // namespace
}  // namespace k3
