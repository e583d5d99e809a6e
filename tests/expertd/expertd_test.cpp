// engined + expertd as separate processes over a real shared-memory segment.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "engined/experts/shm_source.h"
#include "engined/experts/sources.h"
#include "engined/model/model.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/shm/layout.h"
#include "shared/shm/segment.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using engine::EngineOptions;
using engine::Model;
using testing::Process;
using testing::TempDir;

std::string unique_segment(const std::string& tag) {
  return "k3test-" + tag + "-" + std::to_string(::getpid());
}

// Starts expertd and waits until its segment is ready.
struct Expertd {
  std::string segment, socket, log;
  std::unique_ptr<Process> proc;
  Expertd(const TempDir& tmp, const std::string& seg, std::vector<std::string> extra = {},
          const std::string& model = testing::tiny_model_dir()) {
    segment = seg;
    socket = tmp.file(seg + ".sock");
    log = tmp.file(seg + ".log");
    std::vector<std::string> argv = {testing::bin_dir() + "/expertd",
                                     "--model",
                                     model,
                                     "--listen",
                                     "unix:" + socket,
                                     "--segment",
                                     seg,
                                     "--cache-gb",
                                     "0.05"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc = std::make_unique<Process>(argv, log);
  }
  bool wait_ready(double seconds = 30) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      auto s = shm::Segment::open(segment);
      if (s.ok() && s->size() >= sizeof(shm::Header) &&
          shm::header_of(s->base())->ready.load() == 1 &&
          shm::header_of(s->base())->magic == shm::kMagic)
        return true;
      if (proc->wait_exit(0) >= 0) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  ~Expertd() {
    if (proc) proc->stop(SIGTERM);
    shm::Segment::remove(segment);
  }
};

std::vector<int32_t> prompt(int n, int32_t vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 104729 + 7) % vocab));
  return ids;
}

std::vector<float> score(const std::vector<std::string>& segments, const std::vector<int32_t>& ids,
                         Status* status = nullptr, engine::ExpertSourceStats* stats = nullptr) {
  auto m = Model::load(testing::tiny_model_dir(), {}, EngineOptions{});
  if (!m.ok()) {
    if (status) *status = m.status();
    return {};
  }
  engine::ExpertSourceOptions xo;
  xo.expertd_segments = segments;
  auto experts =
      engine::make_expert_source(xo, (*m)->checkpoint(), (*m)->expert_index(), (*m)->config());
  if (!experts.ok()) {
    if (status) *status = experts.status();
    return {};
  }
  auto seq = (*m)->new_sequence();
  std::vector<float> logits;
  Status s = (*m)->forward(**experts, *seq, ids, static_cast<int64_t>(ids.size()), &logits);
  if (status) *status = s;
  if (stats) *stats = (*experts)->stats();
  return logits;
}

std::vector<float> score_standalone(const std::vector<int32_t>& ids) {
  return score({}, ids);
}

TEST(Expertd, LogitsThroughSharedMemoryEqualStandalone) {
  TempDir tmp;
  Expertd e(tmp, unique_segment("same"));
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  auto c = load_model_config(testing::tiny_model_dir());
  const auto ids = prompt(40, static_cast<int32_t>(c->vocab_size));
  const auto want = score_standalone(ids);
  Status st;
  engine::ExpertSourceStats es;
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
  EXPECT_EQ(resp.requests(), resp.hits() + resp.misses());
  EXPECT_EQ(resp.slots_pinned(), 0u) << "every lease released";
  EXPECT_GT(resp.read_p50_ms(), 0.0);

  // The engine counts the expert bytes it got through shared memory: every
  // expert it used was either resident (a hit) or read for it (a miss), and
  // with one client and no prefetch its reads are exactly expertd's.
  EXPECT_GT(es.requests, 0u);
  EXPECT_EQ(es.requests, resp.requests());
  EXPECT_EQ(es.reads + es.hits, es.requests);
  EXPECT_EQ(es.reads, resp.misses());
  EXPECT_GT(es.bytes_read, 0u);
  EXPECT_EQ(es.bytes_read, es.reads * c->expert_bytes());
  EXPECT_EQ(es.bytes_read, resp.bytes_read());
}

// `engined generate --expertd` reports the expert bytes it got through
// shared memory (it printed 0 before): per token, and in total what expertd
// read for it (one client, a cold cache).
TEST(Expertd, GenerateThroughExpertdCountsExpertBytes) {
  TempDir tmp;
  Expertd e(tmp, unique_segment("gen"));
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  auto c = load_model_config(testing::tiny_model_dir());
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
  const double counted = prefill_per_token * 4 + decode_per_token * static_cast<double>(decoded);
  EXPECT_NEAR(counted, static_cast<double>(resp.bytes_read()), 8.0) << r.out;
  EXPECT_EQ(resp.bytes_read() % c->expert_bytes(), 0u);
  EXPECT_GT(resp.reads(), 0u);
}

TEST(Expertd, TwoInstancesSplitTheExpertsByLayer) {
  TempDir tmp;
  Expertd a(tmp, unique_segment("lo"), {"--last-layer", "3"});
  Expertd b(tmp, unique_segment("hi"), {"--first-layer", "4"});
  ASSERT_TRUE(a.wait_ready()) << testing::read_file(a.log);
  ASSERT_TRUE(b.wait_ready()) << testing::read_file(b.log);
  auto c = load_model_config(testing::tiny_model_dir());
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
  auto ck = Checkpoint::open(testing::tiny_model_dir());
  auto c = load_model_config(testing::tiny_model_dir());
  auto index = ExpertIndex::build(**ck, *c);
  ASSERT_TRUE(index.ok());
  engine::ShmSourceOptions o;
  o.segment = seg;
  o.fingerprint = (*ck)->fingerprint();
  auto src = engine::ShmExpertSource::create(o, engine::ExpertShape::of(*c, *index));
  ASSERT_TRUE(src.ok()) << src.status();
  std::vector<int64_t> all(static_cast<size_t>(c->num_experts));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  // Kill expertd while the request is being consumed (slowly).
  int seen = 0;
  Status st = engine::fetch_bytes(**src, 2, all, [&](size_t, const uint8_t*) -> Status {
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
  st = engine::fetch_bytes(**src, 2, {0, 1},
                           [](size_t, const uint8_t*) { return absl::OkStatus(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  // Restart over the stale segment; the same source reattaches.
  e->proc.reset();
  e = std::make_unique<Expertd>(tmp, seg);
  ASSERT_TRUE(e->wait_ready()) << testing::read_file(e->log);
  int served = 0;
  st = engine::fetch_bytes(**src, 2, all, [&](size_t, const uint8_t*) {
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
  auto ck = Checkpoint::open(testing::tiny_model_dir());
  auto c = load_model_config(testing::tiny_model_dir());
  auto index = ExpertIndex::build(**ck, *c);
  ASSERT_TRUE(index.ok());
  engine::ShmSourceOptions o;
  o.segment = e.segment;
  o.fingerprint = (*ck)->fingerprint();
  auto src = engine::ShmExpertSource::create(o, engine::ExpertShape::of(*c, *index));
  ASSERT_TRUE(src.ok()) << src.status();
  engine::ExpertRequest spec;
  spec.layer = 2;
  spec.priority = engine::ExpertPriority::kSpeculative;
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
  ASSERT_TRUE(engine::fetch_bytes(**src, 2, {1, 6}, [](size_t, const uint8_t*) {
                return absl::OkStatus();
              }).ok());
  const engine::ExpertSourceStats st = (*src)->stats();
  EXPECT_EQ(st.speculative, 2u);
  EXPECT_EQ(st.requests, 2u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.reads, 0u);
  EXPECT_EQ(server_stats().reads(), 2u) << "the demand request read nothing";
}

TEST(Expertd, LeasesOfAKilledClientAreReclaimed) {
  TempDir tmp;
  Expertd e(tmp, unique_segment("lease"));
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  auto ck = Checkpoint::open(testing::tiny_model_dir());
  auto c = load_model_config(testing::tiny_model_dir());
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
  // Missing shard.
  fs::copy(testing::tiny_model_dir(), tmp.file("m"), fs::copy_options::recursive);
  fs::remove(tmp.file("m/model-00002-of-00003.safetensors"));
  const std::string seg = unique_segment("bad");
  auto r = testing::run_command({testing::bin_dir() + "/expertd", "--model", tmp.file("m"),
                                 "--listen", "unix:" + tmp.file("b.sock"), "--segment", seg});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model-00002-of-00003.safetensors named by the index is missing"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(shm::Segment::exists(seg)) << "half-started daemon left a segment";
  // Bad values.
  r = testing::run_command({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(),
                            "--segment", seg, "--cache-gb", "-1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cache-gb -1 is outside (0, 100000]"), std::string::npos) << r.err;
  r = testing::run_command({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(),
                            "--segment", "../etc", "--listen", "unix:" + tmp.file("c.sock")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("invalid shared-memory segment name '../etc'"), std::string::npos) << r.err;
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

}  // namespace
}  // namespace k3
