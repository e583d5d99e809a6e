// k3ctl doctor as a real process: on this machine, with a /dev/shm too small
// for the cache (a private mount namespace), and against unit files whose
// system-call filter blocks io_uring.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
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
  fs::copy_file(testing::tiny_model_dir() + "/model-00001-of-00003.safetensors",
                drive + "/model-00001-of-00003.safetensors");
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

}  // namespace
}  // namespace k3
