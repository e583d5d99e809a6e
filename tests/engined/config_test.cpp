// engined serve's checkpoint flags: --checkpoint-mb (RAM), --checkpoint-dir
// with --checkpoint-disk-gb (files) and --snapshot-tokens map onto the engine
// loop's options; a directory without a disk budget is refused naming both
// flags; a negative spacing is refused by the flag's range.
#include "engined/config.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

namespace k3::engined {
namespace {

// Parses `engined serve ARGS` into `cfg`; false when CLI11 refuses them
// (`error` gets its message).
bool parse(Config& cfg, std::vector<std::string> args, std::string* error = nullptr) {
  CLI::App app;
  cfg.add_flags(app);
  args.insert(args.begin(), {"engined", "serve", "--model", "/nonexistent"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    return true;
  } catch (const CLI::ParseError& e) {
    if (error != nullptr) *error = e.what();
    return false;
  }
}

TEST(EnginedConfig, CheckpointFlagsMapOntoTheTwoTiersAndSnapshots) {
  Config cfg;
  ASSERT_TRUE(parse(cfg, {"--checkpoint-mb", "100", "--checkpoint-dir", "/tmp/ck",
                          "--checkpoint-disk-gb", "2.5", "--snapshot-tokens", "64"}));
  ASSERT_TRUE(cfg.serve_only.validate().ok());
  const EngineLoopOptions lo = cfg.serve_only.loop_options();
  EXPECT_EQ(lo.checkpoints.budget_bytes, 100'000'000u);
  EXPECT_EQ(lo.checkpoints.dir, "/tmp/ck");
  EXPECT_EQ(lo.checkpoints.disk_budget_bytes, 2'500'000'000u);
  EXPECT_EQ(lo.snapshot_tokens, 64);
}

TEST(EnginedConfig, SnapshotsDefaultTo256AndTheDiskTo32Gb) {
  Config cfg;
  ASSERT_TRUE(parse(cfg, {"--checkpoint-dir", "/tmp/ck"}));
  ASSERT_TRUE(cfg.serve_only.validate().ok());
  const EngineLoopOptions lo = cfg.serve_only.loop_options();
  EXPECT_EQ(lo.snapshot_tokens, 256);
  EXPECT_EQ(lo.checkpoints.disk_budget_bytes, 32'000'000'000u);
  EXPECT_EQ(lo.checkpoints.budget_bytes, 0u);
  // Without a directory, no disk tier whatever --checkpoint-disk-gb says.
  Config ram;
  ASSERT_TRUE(parse(ram, {"--checkpoint-mb", "10"}));
  EXPECT_EQ(ram.serve_only.loop_options().checkpoints.disk_budget_bytes, 0u);
}

TEST(EnginedConfig, BadCheckpointFlagsAreRefusedNamingThem) {
  Config cfg;
  ASSERT_TRUE(parse(cfg, {"--checkpoint-dir", "/tmp/ck", "--checkpoint-disk-gb", "0"}));
  const Status st = cfg.serve_only.validate();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(msg(st).find("--checkpoint-disk-gb 0"), std::string::npos) << msg(st);
  EXPECT_NE(msg(st).find("--checkpoint-dir"), std::string::npos) << msg(st);
  std::string error;
  Config neg;
  EXPECT_FALSE(parse(neg, {"--snapshot-tokens=-8"}, &error));
  EXPECT_NE(error.find("--snapshot-tokens"), std::string::npos) << error;
  Config disk;
  EXPECT_FALSE(parse(disk, {"--checkpoint-disk-gb=-1"}, &error));
  EXPECT_NE(error.find("--checkpoint-disk-gb"), std::string::npos) << error;
}

}  // namespace
}  // namespace k3::engined
