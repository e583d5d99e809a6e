// expertd deployments and bad bytes, as real processes over real segments:
// drives made by k3ctl place, a dense-only compute node, the segment's mode
// and reservation, NaN scales and the integrity manifest on every read.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "shared/base/file.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/manifest.h"
#include "shared/checkpoint/model_tensors.h"
#include "tests/expertd/expertd_harness.h"
#include "tests/test_util.h"

namespace k3 {

using k3::experts::ExpertSourceStats;

namespace {

namespace fs = std::filesystem;
using engined::EngineOptions;
using engined::Model;
using testing::TempDir;
using namespace expertd_test;

// The deployment of k3ctl place: three drives, each its own expertd over the
// files place wrote (config, index, its experts), the compute node reading
// only the dense part; logits bit-identical to standalone. With two replicas
// over three drives, any two of the drives still serve the whole model.
TEST(Expertd, ThreeDrivesMadeByPlaceServeLikeStandalone) {
  TempDir tmp;
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  const auto ids = prompt(24, static_cast<int32_t>(c->vocab_size));
  const auto want = score_standalone(ids);
  for (const int replicas : {1, 2}) {
    std::vector<std::string> drives;
    std::string list;
    for (int d = 0; d < 3; ++d) {
      drives.push_back(tmp.file(cat("r", replicas, "-nvme", d)));
      fs::create_directory(drives.back());
      list += (d ? "," : "") + drives.back();
    }
    auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "place", "--model",
                                   testing::tiny_model_dir(), "--drives", list, "--replicas",
                                   std::to_string(replicas), "--apply"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::unique_ptr<Expertd>> daemons;
    for (int d = 0; d < 3; ++d) {
      daemons.push_back(std::make_unique<Expertd>(tmp, unique_segment(cat("place", replicas, d)),
                                                  std::vector<std::string>{}, drives[d]));
    }
    for (auto& e : daemons) ASSERT_TRUE(e->wait_ready()) << testing::read_file(e->log);
    Status st;
    ExpertSourceStats es;
    auto got =
        score({daemons[0]->segment, daemons[1]->segment, daemons[2]->segment}, ids, &st, &es);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "replicas " << replicas;
    EXPECT_GT(es.requests, 0u);
    if (replicas == 2) {
      daemons[1].reset();  // one drive gone: the other two hold a copy of everything
      got = score({daemons[0]->segment, daemons[2]->segment}, ids, &st);
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
    }
  }
}

// The segment holds the model's weights and the rings: owner only.
TEST(Expertd, TheSegmentIsOwnerOnly) {
  TempDir tmp;
  Expertd e(tmp, unique_segment("mode"));
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  struct stat st;
  ASSERT_EQ(::stat(("/dev/shm/" + e.segment).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// --segment-dir DIR: the segment is the file DIR/NAME (0660 with
// --segment-mode 0660: a service group maps it too), engined's --expertd
// takes that path, logits are bit-identical, and a clean stop removes it.
TEST(Expertd, ASegmentDirHoldsTheSegmentAsAFile) {
  TempDir tmp;
  const std::string dir = tmp.file("segdir");
  fs::create_directory(dir);
  const std::string name = unique_segment("segdir");
  {
    Expertd e(tmp, name, {"--segment-dir", dir + "/", "--segment-mode", "0660"});
    e.segment = dir + "/" + name;
    ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
    struct stat st;
    ASSERT_EQ(::stat(e.segment.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0660u);
    EXPECT_FALSE(fs::exists("/dev/shm/" + name));
    auto c = checkpoint::load_model_config(testing::tiny_model_dir());
    const auto ids = prompt(10, static_cast<int32_t>(c->vocab_size));
    Status s;
    const auto got = score({e.segment}, ids, &s);
    ASSERT_TRUE(s.ok()) << s;
    const auto want = score_standalone(ids);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
    EXPECT_EQ(e.proc->stop(SIGTERM), 0);
    EXPECT_FALSE(fs::exists(e.segment)) << "a clean stop removes the segment file";
  }
  // Refused with the flag named: a relative or missing directory, another mode.
  for (const auto& [flags, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--segment-dir", "rel/dir"}, "--segment-dir 'rel/dir' must be an absolute path"},
           {{"--segment-dir", tmp.file("none")}, "is not a directory"},
           {{"--segment-mode", "0644"}, "--segment-mode"}}) {
    std::vector<std::string> argv = {testing::bin_dir() + "/expertd", "--model",
                                     testing::tiny_model_dir(), "--listen",
                                     "unix:" + tmp.file("r.sock")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto r = testing::run_command(argv);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
}

// A /dev/shm smaller than --cache-gb: refused at start with the free space
// named, not a SIGBUS (status 135) on the first read into a slot.
TEST(Expertd, ASegmentLargerThanItsFilesystemIsRefusedAtStart) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a private mount namespace";
  TempDir tmp;
  const std::string cmd =
      "mount -t tmpfs -o size=16m tmpfs /dev/shm && exec " + testing::bin_dir() +
      "/expertd --model " + testing::tiny_model_dir() +
      " --segment small-shm --cache-gb 0.05 --listen unix:" + tmp.file("x.sock");
  auto r = testing::run_command({"/usr/bin/unshare", "-m", "/bin/sh", "-c", cmd});
  if (r.err.find("unshare") != std::string::npos && r.exit_code != 0 &&
      r.err.find("expertd") == std::string::npos)
    GTEST_SKIP() << "cannot make a mount namespace: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot reserve"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bytes free of 16777216"), std::string::npos) << r.err;
}

// An expert whose MXFP4 scales hold 0xFF (NaN in E8M0) is refused when read,
// by the in-process reader and by expertd, with the expert named: never NaN
// logits served as an answer.
TEST(Expertd, NanScalesAreRefusedWhenAnExpertIsRead) {
  TempDir tmp;
  const std::string model = tmp.file("model");
  fs::copy(testing::tiny_model_dir(), model, fs::copy_options::recursive);
  auto c = checkpoint::load_model_config(model);
  auto ck = checkpoint::Checkpoint::open(model);
  ASSERT_TRUE(ck.ok());
  // Every expert of the first MoE layer gets one 0xFF scale byte, so any
  // prompt routes into one.
  const int64_t layer = c->first_k_dense_replace;
  for (int64_t e = 0; e < c->num_experts; ++e) {
    const checkpoint::TensorInfo* t =
        (*ck)->find(checkpoint::tensor_names::expert(layer, e, 2, /*packed=*/false));
    ASSERT_NE(t, nullptr);
    base::File f = *base::File::open_write((*ck)->files()[t->file]);
    const uint8_t ff = 0xFF;
    ASSERT_TRUE(f.pwrite_all(&ff, 1, t->offset + 7).ok());
  }
  const auto ids = prompt(8, static_cast<int32_t>(c->vocab_size));
  // In-process (engined score): a named error, exit non-zero, no logits.
  auto r = testing::run_command({testing::bin_dir() + "/engined", "score", "--model", model,
                                 "--ids", "1,2,3,4", "--out", tmp.file("l.f32")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("w2.weight_scale holds 0xFF (NaN in E8M0) at byte 7"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(cat("of layer ", layer)), std::string::npos) << r.err;
  // Through expertd: the request fails with DATA_LOSS, expertd names the
  // expert, and the slot is not kept (the next request reads it again).
  Expertd e(tmp, unique_segment("nan"), {}, model);
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  for (int attempt = 0; attempt < 2; ++attempt) {
    Status st;
    score_model(model, {e.segment}, ids, &st);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  }
  const std::string log = testing::read_file(e.log);
  EXPECT_NE(log.find("holds 0xFF (NaN in E8M0)"), std::string::npos) << log;
  const k3serve::v1::StatsResponse stats = e.stats();
  EXPECT_GE(stats.read_errors(), 2u) << "read again on the second request, refused again";
}

// expertd --manifest hashes every expert it reads: a clean model serves
// exactly as without; a byte flipped on the drive fails each request that
// reads that expert (a small cache forces re-reads), is named in the log and
// counted, and nothing bad is cached.
TEST(Expertd, TheManifestChecksEveryExpertRead) {
  TempDir tmp;
  const std::string model = tmp.file("model");
  fs::copy(testing::tiny_model_dir(), model, fs::copy_options::recursive);
  const std::string man = tmp.file("tiny.manifest");
  ASSERT_EQ(testing::run_command(
                {testing::bin_dir() + "/k3ctl", "manifest", "--model", model, "--out", man})
                .exit_code,
            0);
  auto c = checkpoint::load_model_config(model);
  const auto ids = prompt(12, static_cast<int32_t>(c->vocab_size));
  {
    Expertd e(tmp, unique_segment("man-ok"), {"--manifest", man}, model);
    ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
    Status st;
    const auto got = score_model(model, {e.segment}, ids, &st);
    ASSERT_TRUE(st.ok()) << st;
    const auto want = score_standalone(ids);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
    const auto s = e.stats();
    EXPECT_GT(s.verified_reads(), 0u);
    EXPECT_EQ(s.verified_reads(), s.reads());
    EXPECT_EQ(s.manifest_mismatches(), 0u);
  }
  // One byte of every expert of the first MoE layer flipped on disk.
  auto ck = checkpoint::Checkpoint::open(model);
  const int64_t layer = c->first_k_dense_replace;
  for (int64_t x = 0; x < c->num_experts; ++x) {
    const checkpoint::TensorInfo* t =
        (*ck)->find(checkpoint::tensor_names::expert(layer, x, 1, /*packed=*/true));
    base::File f = *base::File::open_write((*ck)->files()[t->file]);
    uint8_t b = 0;
    ASSERT_TRUE((*ck)->read_bytes(*t, 100, 1, &b).ok());
    b ^= 0x10;
    ASSERT_TRUE(f.pwrite_all(&b, 1, t->offset + 100).ok());
  }
  Expertd e(tmp, unique_segment("man-bad"), {"--manifest", man, "--cache-gb", "0.0003"}, model);
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  for (int attempt = 0; attempt < 3; ++attempt) {
    Status st;
    score_model(model, {e.segment}, ids, &st);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  }
  const auto s = e.stats();
  EXPECT_GE(s.manifest_mismatches(), 3u) << "every read is checked, not only the first";
  EXPECT_GE(s.read_errors(), s.manifest_mismatches());
  const std::string log = testing::read_file(e.log);
  EXPECT_NE(log.find(cat("of layer ", layer, " (")), std::string::npos) << log;
  EXPECT_NE(log.find("the manifest has"), std::string::npos) << log;
}

TEST(Expertd, AManifestOfAnotherModelIsRefusedAtStart) {
  TempDir tmp;
  const std::string man = tmp.file("m");
  testing::write_file(man, checkpoint::manifest_header_line({0x1234, 0}) + "\n");
  auto r = testing::run_command(
      {testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(), "--segment",
       unique_segment("man-other"), "--listen", "unix:" + tmp.file("o.sock"), "--manifest", man});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the manifest of another model"), std::string::npos) << r.err;
}

// The storage-host shape on one machine: the compute node holds a dense-only
// container (k3ctl repack --dense-only), expertd serves the source's shards;
// they agree on the model's identity and the logits are bit-identical.
TEST(Expertd, ADenseOnlyContainerTakesItsExpertsFromExpertdOnTheSource) {
  TempDir tmp;
  const std::string cont = tmp.file("dense");
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "repack", "--model",
                                 testing::tiny_model_dir(), "--out", cont, "--dense-only"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Expertd e(tmp, unique_segment("dense-only"));
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  const auto ids = prompt(20, static_cast<int32_t>(c->vocab_size));
  const auto want = score_standalone(ids);
  auto m = Model::load(cont, {}, EngineOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->fingerprint(),
            (*checkpoint::Checkpoint::open(testing::tiny_model_dir()))->fingerprint());
  engined::ExpertSourceOptions xo;
  xo.expertd_segments = {e.segment};
  auto experts = engined::make_expert_source(xo, **m);
  ASSERT_TRUE(experts.ok()) << experts.status();
  auto seq = (*m)->new_sequence();
  std::vector<float> got;
  ASSERT_TRUE((*m)->forward(**experts, *seq, ids, static_cast<int64_t>(ids.size()), &got).ok());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  // Without expertd the container has no expert to read, and says so.
  auto local = engined::make_expert_source({}, **m);
  EXPECT_EQ(local.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(msg(local.status()).find("a dense-only container?"), std::string::npos)
      << local.status();
}

}  // namespace
}  // namespace k3
