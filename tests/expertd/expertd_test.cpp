// engined + expertd as separate processes over a real shared-memory segment.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/base/file.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/manifest.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/checkpoint/safetensors_writer.h"
#include "shared/experts/shm_source.h"
#include "shared/shm/layout.h"
#include "shared/shm/segment.h"
#include "tests/expertd/expertd_harness.h"
#include "tests/test_util.h"

namespace k3 {

using k3::experts::ExpertPriority;
using k3::experts::ExpertRequest;
using k3::experts::ExpertShape;
using k3::experts::ExpertSourceStats;
using k3::experts::fetch_bytes;
using k3::experts::ShmExpertSource;
using k3::experts::ShmSourceOptions;

namespace {

namespace fs = std::filesystem;
using engined::EngineOptions;
using engined::Model;
using testing::Process;
using testing::TempDir;

using namespace expertd_test;

TEST(Expertd, LogitsThroughSharedMemoryEqualStandalone) {
  TempDir tmp;
  Expertd e(tmp, unique_segment("same"));
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  const auto ids = prompt(40, static_cast<int32_t>(c->vocab_size));
  const auto want = score_standalone(ids);
  Status st;
  ExpertSourceStats es;
  const auto got = score({e.segment}, ids, &st, &es);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);

  // Stats over the control socket reflect the reads.
  auto stub = k3serve::v1::ExpertService::NewStub(
      grpc::CreateChannel("unix:" + e.socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  k3serve::v1::StatsRequest req;
  k3serve::v1::StatsResponse resp;
  ASSERT_TRUE(stub->Stats(&ctx, req, &resp).ok());
  EXPECT_GT(resp.reads(), 0u);
  EXPECT_EQ(resp.bytes_read(), resp.reads() * c->expert_bytes());
  // Prefetches (the engine's speculative lookahead, on by default) are
  // neither hits nor misses.
  EXPECT_EQ(resp.requests(), resp.hits() + resp.misses() + resp.prefetches());
  EXPECT_EQ(resp.slots_pinned(), 0u) << "every lease released";
  EXPECT_GT(resp.read_p50_ms(), 0.0);

  // The engine counts the expert bytes it got through shared memory: every
  // expert it used was either resident (a hit) or read for it (a miss), and
  // with one client its demand reads are exactly expertd's reads that were
  // not speculative.
  EXPECT_GT(es.requests, 0u);
  EXPECT_EQ(es.requests, resp.requests() - resp.prefetches());
  EXPECT_EQ(es.reads + es.hits, es.requests);
  EXPECT_EQ(es.reads, resp.misses());
  EXPECT_GT(es.bytes_read, 0u);
  EXPECT_EQ(es.bytes_read, es.reads * c->expert_bytes());
  EXPECT_EQ(es.bytes_read, (resp.reads() - resp.speculative_reads()) * c->expert_bytes());
  EXPECT_LE(es.speculative_hits, resp.speculative_used());
}

// `engined generate --expertd` reports the expert bytes it got through
// shared memory (it printed 0 before): per token, and in total what expertd
// read for it (one client, a cold cache).
TEST(Expertd, GenerateThroughExpertdCountsExpertBytes) {
  TempDir tmp;
  Expertd e(tmp, unique_segment("gen"));
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  auto r = testing::run_command({testing::bin_dir() + "/engined", "generate", "--model",
                                 testing::tiny_model_dir(), "--ids", "5,6,7,8", "--max-tokens", "5",
                                 "--expertd", e.segment, "--log-level", "warn"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("expert bytes read per token ");
  ASSERT_NE(at, std::string::npos) << r.out;
  double decode_per_token = -1, prefill_per_token = -1, experts_per_token = -1;
  long long decoded = -1;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at,
                        "expert bytes read per token %lf (prefill %lf), experts per token %lf",
                        &decode_per_token, &prefill_per_token, &experts_per_token),
            3)
      << r.out;
  const size_t d = r.out.find("s/token (");
  ASSERT_NE(d, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + d, "s/token (%lld tokens)", &decoded), 1) << r.out;
  EXPECT_EQ(decoded, 4);
  EXPECT_GT(prefill_per_token, 0) << r.out;
  EXPECT_GT(decode_per_token, 0) << r.out;
  EXPECT_GT(experts_per_token, 0) << r.out;
  // Every byte counted is a whole expert expertd read for this client.
  auto stub = k3serve::v1::ExpertService::NewStub(
      grpc::CreateChannel("unix:" + e.socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  k3serve::v1::StatsResponse resp;
  ASSERT_TRUE(stub->Stats(&ctx, k3serve::v1::StatsRequest(), &resp).ok());
  // (Speculative reads are counted apart: the demand bytes are the rest.)
  const double counted = prefill_per_token * 4 + decode_per_token * static_cast<double>(decoded);
  EXPECT_NEAR(counted,
              static_cast<double>(resp.bytes_read() - resp.speculative_reads() * c->expert_bytes()),
              8.0)
      << r.out;
  EXPECT_EQ(resp.bytes_read() % c->expert_bytes(), 0u);
  EXPECT_GT(resp.reads(), 0u);
}

TEST(Expertd, TwoInstancesSplitTheExpertsByLayer) {
  TempDir tmp;
  Expertd a(tmp, unique_segment("lo"), {"--last-layer", "3"});
  Expertd b(tmp, unique_segment("hi"), {"--first-layer", "4"});
  ASSERT_TRUE(a.wait_ready()) << testing::read_file(a.log);
  ASSERT_TRUE(b.wait_ready()) << testing::read_file(b.log);
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  const auto ids = prompt(24, static_cast<int32_t>(c->vocab_size));
  Status st;
  const auto got = score({a.segment, b.segment}, ids, &st);
  ASSERT_TRUE(st.ok()) << st;
  const auto want = score_standalone(ids);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  // Each instance read only its own layers.
  for (const Expertd* e : {&a, &b}) {
    auto seg = shm::Segment::open(e->segment);
    ASSERT_TRUE(seg.ok());
    shm::SlotEntry* slots = shm::slots_of(seg->base());
    for (uint32_t i = 0; i < shm::header_of(seg->base())->slot_count; ++i) {
      if (slots[i].state.load() != static_cast<uint32_t>(shm::SlotState::kReady)) continue;
      if (e == &a)
        EXPECT_LE(slots[i].layer.load(), 3);
      else
        EXPECT_GE(slots[i].layer.load(), 4);
    }
  }
  // One instance alone cannot serve the whole model: a clear error.
  score({a.segment}, ids, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_NE(msg(st).find("no attached expertd serves expert"), std::string::npos) << st;
}

TEST(Expertd, KilledMidRequestFailsCleanlyThenRecoversAfterRestart) {
  TempDir tmp;
  const std::string seg = unique_segment("kill");
  auto e = std::make_unique<Expertd>(tmp, seg);
  ASSERT_TRUE(e->wait_ready()) << testing::read_file(e->log);
  auto ck = checkpoint::Checkpoint::open(testing::tiny_model_dir());
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ShmSourceOptions o;
  o.segment = seg;
  o.fingerprint = (*ck)->fingerprint();
  auto src = ShmExpertSource::create(o, ExpertShape::of(*c));
  ASSERT_TRUE(src.ok()) << src.status();
  std::vector<int64_t> all(static_cast<size_t>(c->num_experts));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  // Kill expertd while the request is being consumed (slowly).
  int seen = 0;
  Status st = fetch_bytes(**src, 2, all, [&](size_t, const uint8_t*) -> Status {
    if (++seen == 3) {
      ::kill(e->proc->pid(), SIGKILL);
      e->proc->wait_exit(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return absl::OkStatus();
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_EQ(seen, 3) << "no expert is computed on after expertd died";
  // While it is down: a clear UNAVAILABLE.
  st = fetch_bytes(**src, 2, {0, 1}, [](size_t, const uint8_t*) { return absl::OkStatus(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  // Restart over the stale segment; the same source reattaches.
  e->proc.reset();
  e = std::make_unique<Expertd>(tmp, seg);
  ASSERT_TRUE(e->wait_ready()) << testing::read_file(e->log);
  int served = 0;
  st = fetch_bytes(**src, 2, all, [&](size_t, const uint8_t*) {
    ++served;
    return absl::OkStatus();
  });
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(served, c->num_experts);
}

// A speculative request becomes expertd prefetches: read, not leased, never
// completed; the demand request after it finds the experts resident.
TEST(Expertd, SpeculativeRequestsBecomePrefetches) {
  TempDir tmp;
  Expertd e(tmp, unique_segment("spec"));
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  auto ck = checkpoint::Checkpoint::open(testing::tiny_model_dir());
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ShmSourceOptions o;
  o.segment = e.segment;
  o.fingerprint = (*ck)->fingerprint();
  auto src = ShmExpertSource::create(o, ExpertShape::of(*c));
  ASSERT_TRUE(src.ok()) << src.status();
  ExpertRequest spec;
  spec.layer = 2;
  spec.priority = ExpertPriority::kSpeculative;
  spec.work = {{1, false, {}}, {6, false, {}}};
  ASSERT_TRUE((*src)->submit(spec).ok());
  EXPECT_EQ((*src)->outstanding(), 0u);
  auto stub = k3serve::v1::ExpertService::NewStub(
      grpc::CreateChannel("unix:" + e.socket, grpc::InsecureChannelCredentials()));
  auto server_stats = [&] {
    grpc::ClientContext ctx;
    k3serve::v1::StatsResponse resp;
    EXPECT_TRUE(stub->Stats(&ctx, k3serve::v1::StatsRequest(), &resp).ok());
    return resp;
  };
  for (int i = 0; i < 500 && server_stats().reads() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto before = server_stats();
  EXPECT_EQ(before.prefetches(), 2u);
  EXPECT_EQ(before.reads(), 2u);
  EXPECT_EQ(before.slots_pinned(), 0u) << "prefetches are not leased";
  ASSERT_TRUE(
      fetch_bytes(**src, 2, {1, 6}, [](size_t, const uint8_t*) { return absl::OkStatus(); }).ok());
  const ExpertSourceStats st = (*src)->stats();
  EXPECT_EQ(st.speculative, 2u);
  EXPECT_EQ(st.requests, 2u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.reads, 0u);
  // The client heard of both speculative reads (notices, not leases) and
  // that the demand request used them (the reads speculation hid).
  EXPECT_EQ(st.speculative_reads, 2u);
  EXPECT_EQ(st.speculative_bytes, 2 * c->expert_bytes());
  EXPECT_EQ(st.speculative_hits, 2u);
  const auto after = server_stats();
  EXPECT_EQ(after.reads(), 2u) << "the demand request read nothing";
  EXPECT_EQ(after.speculative_reads(), 2u);
  EXPECT_EQ(after.speculative_used(), 2u);
  EXPECT_EQ(after.speculative_wasted(), 0u);
  // A second demand request for them is an ordinary hit.
  ASSERT_TRUE(
      fetch_bytes(**src, 2, {1, 6}, [](size_t, const uint8_t*) { return absl::OkStatus(); }).ok());
  EXPECT_EQ((*src)->stats().speculative_hits, 2u);
}

// The segment says whether expertd reads buffered (through the page cache),
// and the engine's source reports it: speculation treats those reads as
// copies made by this host's cores (engined/model/speculator.h).
TEST(Expertd, TheSegmentSaysWhetherReadsAreBuffered) {
  TempDir tmp;
  Expertd buffered(tmp, unique_segment("buf"), {"--no-direct"});
  Expertd plain(tmp, unique_segment("dio"));
  ASSERT_TRUE(buffered.wait_ready()) << testing::read_file(buffered.log);
  ASSERT_TRUE(plain.wait_ready()) << testing::read_file(plain.log);
  auto ck = checkpoint::Checkpoint::open(testing::tiny_model_dir());
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  auto source_of = [&](const Expertd& e) {
    ShmSourceOptions o;
    o.segment = e.segment;
    o.fingerprint = (*ck)->fingerprint();
    return ShmExpertSource::create(o, ExpertShape::of(*c));
  };
  auto b = source_of(buffered);
  auto d = source_of(plain);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(d.ok()) << d.status();
  auto direct_io = [](const Expertd& e) {
    auto stub = k3serve::v1::ExpertService::NewStub(
        grpc::CreateChannel("unix:" + e.socket, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    k3serve::v1::DescribeResponse resp;
    EXPECT_TRUE(stub->Describe(&ctx, k3serve::v1::DescribeRequest(), &resp).ok());
    return resp.direct_io();
  };
  EXPECT_FALSE(direct_io(buffered));
  EXPECT_TRUE((*b)->reads_use_host_cores());
  // Without --no-direct: O_DIRECT where the filesystem of the test model
  // allows it (tmpfs does not: then it is buffered too).
  EXPECT_EQ((*d)->reads_use_host_cores(), !direct_io(plain));
}

TEST(Expertd, LeasesOfAKilledClientAreReclaimed) {
  TempDir tmp;
  Expertd e(tmp, unique_segment("lease"));
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  auto ck = checkpoint::Checkpoint::open(testing::tiny_model_dir());
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  Process holder({std::string(K3_TEST_BIN_DIR) + "/lease_holder", e.segment,
                  testing::tiny_model_dir(), "3", "1", "2", "3", "4", "5"},
                 tmp.file("holder.log"));
  auto seg = shm::Segment::open(e.segment);
  ASSERT_TRUE(seg.ok());
  shm::SlotEntry* slots = shm::slots_of(seg->base());
  const uint32_t n = shm::header_of(seg->base())->slot_count;
  auto pinned = [&] {
    int p = 0;
    for (uint32_t i = 0; i < n; ++i) p += slots[i].pins.load() != 0;
    return p;
  };
  auto until = [](auto pred, double seconds) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  ASSERT_TRUE(until([&] { return pinned() == 5; }, 20))
      << pinned() << " pinned; holder: " << testing::read_file(tmp.file("holder.log"));
  EXPECT_EQ(holder.stop(SIGKILL), 128 + SIGKILL);
  EXPECT_TRUE(until([&] { return pinned() == 0; }, 10)) << pinned() << " still pinned";
}

TEST(Expertd, RefusesABadStartAndALiveTwin) {
  TempDir tmp;
  // Shards holding no expert at all: nothing to serve.
  fs::copy(testing::tiny_model_dir(), tmp.file("m"), fs::copy_options::recursive);
  fs::remove(tmp.file("m/model-00002-of-00005.safetensors"));
  fs::remove(tmp.file("m/model-00003-of-00005.safetensors"));
  const std::string seg = unique_segment("bad");
  auto r = testing::run_command({testing::bin_dir() + "/expertd", "--model", tmp.file("m"),
                                 "--listen", "unix:" + tmp.file("b.sock"), "--segment", seg});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("hold no routed expert of the model"), std::string::npos) << r.err;
  EXPECT_FALSE(shm::Segment::exists(seg)) << "half-started daemon left a segment";
  // Bad values.
  r = testing::run_command({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(),
                            "--segment", seg, "--cache-gb", "-1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cache-gb -1 is outside (0, 100000]"), std::string::npos) << r.err;
  r = testing::run_command({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(),
                            "--segment", "../etc", "--listen", "unix:" + tmp.file("c.sock")});
  EXPECT_EQ(r.exit_code, 2) << "a bad flag value, refused before anything is opened";
  EXPECT_NE(r.err.find("invalid shared-memory segment name '../etc'"), std::string::npos) << r.err;
  // A KiB count that is not a number is named, not a crash (it used to abort
  // in std::stoull).
  for (const char* chunk : {"abc", "99999999999999999999", "-4"}) {
    r = testing::run_command({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(),
                              "--segment", seg, "--read-chunk-kb", chunk});
    EXPECT_EQ(r.exit_code, 105) << chunk << ": " << r.err;
    EXPECT_NE(r.err.find("--read-chunk-kb"), std::string::npos) << r.err;
  }
  // Another user's file under the segment's name is neither served nor
  // replaced: expertd says whose it is (the sticky /dev/shm keeps it).
  const std::string squat = unique_segment("squat");
  r = testing::run_command({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "/bin/sh", "-c", "umask 0; : > /dev/shm/" + squat});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = testing::run_command({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(),
                            "--segment", squat, "--listen", "unix:" + tmp.file("s.sock")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("belongs to uid 65534 (mode 0666)"), std::string::npos) << r.err;
  struct stat st {};
  EXPECT_EQ(::stat(("/dev/shm/" + squat).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u) << "the squatter's file was replaced";
  shm::Segment::remove(squat);
  // A live instance's segment is not taken over by a second one.
  Expertd live(tmp, unique_segment("live"));
  ASSERT_TRUE(live.wait_ready()) << testing::read_file(live.log);
  r = testing::run_command({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(),
                            "--segment", live.segment, "--listen", "unix:" + tmp.file("d.sock")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is served by a live expertd"), std::string::npos) << r.err;
  // Clean shutdown removes the segment.
  EXPECT_EQ(live.proc->stop(SIGTERM), 0);
  EXPECT_FALSE(shm::Segment::exists(live.segment));
}

// Re-shards the tiny model as "dense on the compute node, experts spread
// over drives": DIR/model holds the config, the index and dense.safetensors;
// DIR/d1 the even experts of every layer, DIR/d2 the odd ones (each expert's
// six tensors back to back, byte-identical).
void split_model(const std::string& dir) {
  const std::string src = testing::tiny_model_dir();
  fs::create_directories(dir + "/model");
  fs::create_directories(dir + "/d1");
  fs::create_directories(dir + "/d2");
  for (const auto& f : fs::directory_iterator(src)) {
    const std::string name = f.path().filename().string();
    if (name.find(".safetensors") == std::string::npos) fs::copy(f.path(), dir + "/model/" + name);
  }
  auto ck = checkpoint::Checkpoint::open(src);
  ASSERT_TRUE(ck.ok()) << ck.status();
  std::vector<const checkpoint::TensorInfo*> part[3];  // dense, even, odd
  for (const checkpoint::TensorInfo& t : (*ck)->tensors()) {
    size_t p = 0;
    const size_t at = t.name.find(".block_sparse_moe.experts.");
    if (at != std::string::npos) p = 1 + std::stoll(t.name.substr(at + 26)) % 2;
    part[p].push_back(&t);
  }
  const std::string files[3] = {dir + "/model/dense.safetensors",
                                dir + "/d1/experts-even.safetensors",
                                dir + "/d2/experts-odd.safetensors"};
  nlohmann::json map = nlohmann::json::object();
  for (int p = 0; p < 3; ++p) {
    // Storage order of the source: an expert's tensors stay contiguous.
    std::sort(part[p].begin(), part[p].end(),
              [](const checkpoint::TensorInfo* a, const checkpoint::TensorInfo* b) {
                return a->file != b->file ? a->file < b->file : a->offset < b->offset;
              });
    std::vector<checkpoint::SafetensorsWriter::Entry> entries;
    for (const checkpoint::TensorInfo* t : part[p])
      entries.push_back({t->name, t->dtype, t->shape});
    auto w = checkpoint::SafetensorsWriter::create(files[p], entries);
    ASSERT_TRUE(w.ok()) << w.status();
    for (const checkpoint::TensorInfo* t : part[p]) {
      std::vector<uint8_t> bytes(t->nbytes);
      ASSERT_TRUE((*ck)->read_bytes(*t, 0, t->nbytes, bytes.data()).ok());
      ASSERT_TRUE((*w)->write(bytes.data(), bytes.size()).ok());
      map[t->name] = fs::path(files[p]).filename().string();
    }
    ASSERT_TRUE((*w)->finish().ok());
  }
  fs::remove(dir + "/model/model.safetensors.index.json");
  testing::write_file(
      dir + "/model/model.safetensors.index.json",
      nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", map}}.dump());
}

// Issue 10 part 1: one expertd per drive serves exactly the experts of the
// shards on its drive; engined with the dense shards only (it never opens an
// expert shard) computes logits bit-identical to standalone through two.
TEST(Expertd, DrivesOwnTheirShards) {
  TempDir tmp;
  const std::string split = tmp.file("split");
  split_model(split);
  if (::testing::Test::HasFatalFailure()) return;
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  // The compute node's view: only the dense shard is opened.
  auto dense = checkpoint::Checkpoint::open(split + "/model", {split + "/d1", split + "/d2"},
                                            checkpoint::ShardPolicy::kDense);
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_EQ((*dense)->files().size(), 1u);
  EXPECT_EQ(fs::path((*dense)->files()[0]).filename(), "dense.safetensors");
  EXPECT_EQ((*dense)->unopened_shards(),
            (std::vector<std::string>{"experts-even.safetensors", "experts-odd.safetensors"}));
  EXPECT_EQ((*dense)->fingerprint(),
            (*checkpoint::Checkpoint::open(testing::tiny_model_dir()))->fingerprint());

  Expertd even(tmp, unique_segment("even"), {"--shard-dir", split + "/d1"}, split + "/model");
  Expertd odd(tmp, unique_segment("odd"), {"--shard-dir", split + "/d2"}, split + "/model");
  ASSERT_TRUE(even.wait_ready()) << testing::read_file(even.log);
  ASSERT_TRUE(odd.wait_ready()) << testing::read_file(odd.log);

  // Describe: every MoE layer, half its experts, named by the bitmap.
  auto stub = k3serve::v1::ExpertService::NewStub(
      grpc::CreateChannel("unix:" + even.socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  k3serve::v1::DescribeResponse d;
  ASSERT_TRUE(stub->Describe(&ctx, k3serve::v1::DescribeRequest(), &d).ok());
  ASSERT_EQ(d.layers_size(), c->num_moe_layers());
  for (const auto& l : d.layers()) {
    EXPECT_EQ(l.expert_count(), static_cast<uint32_t>(c->num_experts / 2));
    ASSERT_EQ(l.experts().size(), static_cast<size_t>((c->num_experts + 7) / 8));
    for (int64_t e = 0; e < c->num_experts; ++e)
      EXPECT_EQ((static_cast<uint8_t>(l.experts()[e / 8]) >> (e % 8)) & 1, e % 2 == 0 ? 1 : 0)
          << "layer " << l.layer() << " expert " << e;
  }
  auto seg = shm::Segment::open(odd.segment);
  ASSERT_TRUE(seg.ok());
  for (int64_t e = 0; e < c->num_experts; ++e)
    EXPECT_EQ(shm::serves(seg->base(), 2, static_cast<uint32_t>(e)), e % 2 == 1) << e;

  // Dense-only engined through both drives: bit-identical to standalone.
  const auto ids = prompt(24, static_cast<int32_t>(c->vocab_size));
  const auto want = score_standalone(ids);
  auto m = Model::load(split + "/model", {}, EngineOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  engined::ExpertSourceOptions xo;
  xo.expertd_segments = {even.segment, odd.segment};
  auto experts = engined::make_expert_source(xo, **m);
  ASSERT_TRUE(experts.ok()) << experts.status();
  auto seq = (*m)->new_sequence();
  std::vector<float> got;
  ASSERT_TRUE((*m)->forward(**experts, *seq, ids, static_cast<int64_t>(ids.size()), &got).ok());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  // One drive alone cannot serve the model; without expertd, the dense
  // shards do not hold the experts: clear errors, no local fallback.
  xo.expertd_segments = {even.segment};
  auto one = engined::make_expert_source(xo, **m);
  ASSERT_TRUE(one.ok());
  auto seq2 = (*m)->new_sequence();
  Status st = (*m)->forward(**one, *seq2, ids, 1, &got);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  auto local = engined::make_expert_source({}, **m);
  EXPECT_EQ(local.status().code(), absl::StatusCode::kFailedPrecondition) << local.status();
  EXPECT_NE(msg(local.status()).find("hold 0 of the model's"), std::string::npos) << local.status();
}

}  // namespace
}  // namespace k3
