// k3ctl doctor as a real process: on this machine, with a /dev/shm too small
// for the cache (a private mount namespace), and against unit files whose
// system-call filter blocks io_uring; drives read from a 256 MiB temporary
// file (removed, also on SIGTERM) or a shard that big, a directory in RAM
// (tmpfs) not measured; the plan's figures.
#include <signal.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/test_util.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

bool on_tmpfs(const std::string& dir) {
  struct statfs s {};
  return ::statfs(dir.c_str(), &s) == 0 && s.f_type == 0x01021994;  // TMPFS_MAGIC
}

// A directory standing for a drive: in the temporary directory, or beside
// the test programs where that is tmpfs (RAM: doctor would rightly not
// measure it). Removed by the destructor.
class DriveDir {
 public:
  explicit DriveDir(const TempDir& tmp) {
    path_ = on_tmpfs(tmp.path())
                ? testing::bin_dir() + "/doctor-drive-" + std::to_string(::getpid())
                : tmp.file("nvme0");
    fs::create_directories(path_);
  }
  ~DriveDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

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
  const DriveDir drive_dir(tmp);
  const std::string& drive = drive_dir.path();
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
  // The tiny model's 11 MB shard is too small to mean anything: a 256 MiB
  // temporary file is read instead, and removed.
  const std::string detail = c[drive_check]["detail"];
  EXPECT_EQ(c[drive_check]["status"], "ok") << c[drive_check];
  EXPECT_CONTAINS(detail, " GB/s (io_uring, registered buffers, best at queue depth ");
  EXPECT_CONTAINS(detail, "expert-sized reads of a 256 MiB temporary file, removed)");
  EXPECT_EQ(testing::dir_snapshot(drive).size(), 1u);
  EXPECT_NE(c["ram"]["detail"].get<std::string>().find("dense part"), std::string::npos);
  // The plan: the tiny model's expert bytes per token at the measured rate.
  for (const char* name : {"plan cache", "plan drives", "plan decode", "plan ram"})
    ASSERT_TRUE(c.count(name)) << name << "\n" << r.out;
  const json& decode = c["plan decode"]["plan"];
  EXPECT_EQ(decode["bytes_per_token"], 5 * 4 * 52224);  // MoE layers x top-k x expert bytes
  EXPECT_GT(decode["drive_gbps"].get<double>(), 0.0);
  EXPECT_EQ(c["plan drives"]["plan"]["drives"][0]["gbps"], decode["drive_gbps"]);
  // The tiny model's experts all fit the RAM: the cache holds them all.
  EXPECT_EQ(c["plan cache"]["plan"]["cache_share"], 1.0) << c["plan cache"];
  EXPECT_CONTAINS(c["plan cache"]["detail"].get<std::string>(), "expertd --cache-gb 0.01: ");
  EXPECT_EQ(c["plan ram"]["plan"]["experts_fit"], true);
  bool any_fail = false;
  for (auto& [k, v] : c) {
    if (v["status"] == "plan") continue;
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
  // Already at 4 dense bits and nothing fits: no fewer bits are suggested.
  EXPECT_EQ(c["ram"]["fix"].get<std::string>().find("bits"), std::string::npos) << c["ram"]["fix"];

  // At --dense-bits 8 with room for 4/8/8 but not 8/8/8: 4 dense bits fit.
  const json options = c["plan ram"]["plan"]["dense_options"];
  ASSERT_EQ(options[0]["bits"], "4/8/8") << options;
  ASSERT_EQ(options[1]["bits"], "8/8/8") << options;
  const uint64_t at4 = options[0]["bytes"].get<uint64_t>(),
                 at8 = options[1]["bytes"].get<uint64_t>();
  ASSERT_LT(at4 + 4096, at8);
  testing::write_file((dir / "memory.max").string(), std::to_string(at4 + 4096) + "\n");
  testing::write_file((dir / "memory.current").string(), "0\n");
  r = testing::run_command({testing::bin_dir() + "/k3ctl", "doctor", "--json", "--model",
                            testing::tiny_model_dir(), "--units-dir", tmp.path(), "--cgroup-root",
                            tmp.file("cgroup"), "--dense-bits", "8"});
  c = checks(r.out);
  EXPECT_EQ(c["ram"]["status"], "fail") << r.out;
  EXPECT_EQ(c["ram"]["fix"].get<std::string>().rfind("use fewer bits (--dense-bits 4: ", 0), 0u)
      << c["ram"]["fix"];

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

// A directory in RAM is no drive: said so (tmpfs by name), no rate, and the
// plan leaves it out.
TEST(Doctor, ADirectoryInRamIsNotMeasured) {
  if (!on_tmpfs("/dev/shm")) GTEST_SKIP() << "/dev/shm is not tmpfs here";
  const std::string dir = "/dev/shm/k3doctor-" + std::to_string(::getpid());
  fs::create_directory(dir);
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "doctor", "--json", "--drive", dir,
                                 "--read-seconds", "0.2", "--units-dir", "/nonexistent"});
  const bool empty = fs::is_empty(dir);
  fs::remove_all(dir);
  auto c = checks(r.out);
  const json d = c["drive " + dir];
  EXPECT_EQ(d["status"], "warn") << r.out;
  EXPECT_CONTAINS(d["detail"].get<std::string>(), "on tmpfs (RAM, not a drive");
  EXPECT_CONTAINS(d["detail"].get<std::string>(), "no read rate measured");
  EXPECT_CONTAINS(d["fix"].get<std::string>(), "put the shards on a drive's filesystem");
  EXPECT_TRUE(empty);  // no 256 MiB written into RAM
  EXPECT_TRUE(c["plan drives"]["plan"]["drives"][0]["gbps"].is_null()) << c["plan drives"];
  EXPECT_CONTAINS(c["plan decode"]["detail"].get<std::string>(), "no drive rate measured");
}

// A shard of at least 256 MiB is read in place (no temporary file); the plan
// is for Kimi K3 from its published config: 92 x 16 x 17,547,264 bytes per
// token over the measured rate.
TEST(Doctor, ReadsABigShardInPlaceAndPlansTheRealModel) {
  TempDir tmp;
  const DriveDir drive_dir(tmp);
  const std::string& drive = drive_dir.path();
  {
    std::ofstream out(drive + "/model-00007-of-00064.safetensors", std::ios::binary);
    std::string block(1 << 20, '\0');
    for (int i = 0; i < 256; ++i) {
      for (size_t j = 0; j < block.size(); j += 64) block[j] = static_cast<char>(i * 31 + j);
      out.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
  }
  const std::string model = tmp.file("k3");
  fs::create_directory(model);
  fs::copy_file(testing::source_dir() + "/tests/shared/checkpoint/data/kimi_k3_config.json",
                model + "/config.json");
  auto r =
      testing::run_command({testing::bin_dir() + "/k3ctl", "doctor", "--json", "--model", model,
                            "--drive", drive, "--read-seconds", "0.3", "--units-dir", tmp.path()});
  auto c = checks(r.out);
  const json d = c["drive " + drive];
  EXPECT_EQ(d["status"], "ok") << r.out;
  EXPECT_CONTAINS(d["detail"].get<std::string>(),
                  "reads of model-00007-of-00064.safetensors, 0.27 GB)");
  EXPECT_EQ(testing::dir_snapshot(drive).size(), 1u);
  const json decode = c["plan decode"]["plan"];
  const double bytes = 92.0 * 16 * 17547264;
  EXPECT_EQ(decode["bytes_per_token"].get<double>(), bytes);
  const double share = c["plan cache"]["plan"]["cache_share"];
  EXPECT_NEAR(decode["s_per_token"].get<double>(),
              bytes * (1 - share) / (decode["drive_gbps"].get<double>() * 1e9), 1e-9);
  EXPECT_NEAR(decode["gbps_for_5_s_per_token"].get<double>(), bytes * (1 - share) / 5 / 1e9, 1e-9);
  // "~X s/token[ (Y with a cold cache)] on MODEL: ..." (a cache only where the RAM has room).
  EXPECT_CONTAINS(
      c["plan decode"]["detail"].get<std::string>(),
      " on " + model + ": 25.8 GB of experts per token (92 MoE layers x top 16 x 17.5 MB)");
  // The dense part at 4/8/8 bits, and the other settings, each said to fit or not.
  const json ram = c["plan ram"]["plan"];
  ASSERT_EQ(ram["dense_options"].size(), 3u) << ram;
  EXPECT_EQ(ram["dense_options"][0]["bits"], "4/8/8");
  EXPECT_GT(ram["dense_options"][0]["bytes"].get<double>(), 30e9);
  // The readable form ends with the plan.
  r = testing::run_command({testing::bin_dir() + "/k3ctl", "doctor", "--model", model, "--drive",
                            drive, "--read-seconds", "0.3", "--units-dir", tmp.path()});
  const size_t plan = r.out.find("\nplan\n");
  ASSERT_NE(plan, std::string::npos) << r.out;
  for (const char* line : {"      cache ", "      drives ", "      decode ", "      ram "})
    EXPECT_NE(r.out.find(line, plan), std::string::npos) << line << "\n" << r.out;
}

// SIGTERM while the temporary file is read: it is removed all the same.
TEST(Doctor, RemovesItsTemporaryFileOnSigterm) {
  TempDir tmp;
  const DriveDir drive_dir(tmp);
  const std::string& drive = drive_dir.path();
  testing::Process p({testing::bin_dir() + "/k3ctl", "doctor", "--drive", drive, "--read-seconds",
                      "300", "--units-dir", tmp.path()});
  bool seen = false;
  for (int i = 0; i < 600 && !seen; ++i) {
    for (const auto& e : fs::directory_iterator(drive))
      seen |= e.path().filename().string().rfind(".k3ctl-doctor-", 0) == 0;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(seen) << "no temporary file appeared in " << drive;
  EXPECT_EQ(p.stop(SIGTERM), 128 + SIGTERM);
  EXPECT_TRUE(fs::is_empty(drive)) << testing::dir_snapshot(drive).size();
}

TEST(Doctor, ATestFileUnder256MiBIsRefused) {
  auto r = testing::run_command(
      {testing::bin_dir() + "/k3ctl", "doctor", "--test-file-mb", "16", "--units-dir", "/x"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_CONTAINS(r.err, "--test-file-mb");
}

}  // namespace
}  // namespace k3
