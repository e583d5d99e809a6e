// Storage faults under expertd: its shard files seen through faultfs, which
// fails chosen byte ranges with EIO or a short read. expertd names the shard
// and the offset, fails only the requests that need the expert, keeps
// serving the others, and reads the range again on the next request, so a
// fault that clears (a retried sector, a replaced file) heals without a
// restart. Through engined and the gateway the failed request gets a clear
// error, and the same request succeeds once the fault is gone.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/base/file.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/model_config.h"
#include "shared/experts/shm_source.h"
#include "shared/status.h"
#include "tests/faults/daemon_stack.h"
#include "tests/faults/fault_fs.h"
#include "tests/test_util.h"

namespace k3::faults_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

k3serve::v1::StatsResponse expertd_stats(const std::string& socket) {
  auto stub = k3serve::v1::ExpertService::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  k3serve::v1::StatsResponse st;
  grpc::Status s = stub->Stats(&ctx, k3serve::v1::StatsRequest(), &st);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return st;
}

// Waits until expertd's segment is ready (its control socket answers Stats).
bool expertd_ready(DaemonStack& s, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!s.running(Daemon::kExpertd)) return false;
    auto stub = k3serve::v1::ExpertService::NewStub(
        grpc::CreateChannel("unix:" + s.expertd_socket(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    k3serve::v1::StatsResponse st;
    if (stub->Stats(&ctx, k3serve::v1::StatsRequest(), &st).ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

struct Fixture {
  TempDir tmp;
  std::string model;  // the real files
  std::unique_ptr<FaultFs> ffs;
  std::unique_ptr<checkpoint::ModelConfig> config;
  std::unique_ptr<checkpoint::Checkpoint> ck;
  std::unique_ptr<checkpoint::ExpertIndex> index;

  Fixture() {
    model = tmp.file("model");
    fs::copy(testing::tiny_model_dir(), model, fs::copy_options::recursive);
    ffs = std::make_unique<FaultFs>(model, tmp.file("mnt"), tmp.path());
    auto c = checkpoint::load_model_config(model);
    config = std::make_unique<checkpoint::ModelConfig>(*c);
    auto k = checkpoint::Checkpoint::open(model);
    ck = std::move(*k);
    index =
        std::make_unique<checkpoint::ExpertIndex>(*checkpoint::ExpertIndex::build(*ck, *config));
  }
  // "NAME OFFSET LENGTH KIND" of `len` bytes at `at` inside the expert.
  std::string fault(int64_t layer, int64_t expert, uint64_t at, uint64_t len,
                    const char* kind) const {
    const checkpoint::ExpertLocation& loc = index->at(layer, expert);
    return cat(fs::path(ck->files()[loc.file]).filename().string(), " ", loc.offset + at, " ", len,
               " ", kind, "\n");
  }
  std::string shard_name(int64_t layer, int64_t expert) const {
    return fs::path(ck->files()[index->at(layer, expert).file]).filename().string();
  }
  // The expert's bytes as stored.
  std::vector<uint8_t> bytes(int64_t layer, int64_t expert) const {
    const checkpoint::ExpertLocation& loc = index->at(layer, expert);
    std::vector<uint8_t> out(index->expert_bytes());
    base::File f = *base::File::open_read(ck->files()[loc.file]);
    EXPECT_TRUE(f.pread_exact(out.data(), out.size(), loc.offset).ok());
    return out;
  }
};

// Fetches one expert through expertd's segment; its bytes into *out.
Status fetch(experts::ShmExpertSource& src, int64_t layer, int64_t expert,
             std::vector<uint8_t>* out, uint64_t nbytes) {
  return experts::fetch_bytes(src, layer, {expert}, [&](size_t, const uint8_t* b) {
    out->assign(b, b + nbytes);
    return absl::OkStatus();
  });
}

TEST(ReadFaults, ExpertdNamesTheRangeFailsThatExpertOnlyAndRetriesIt) {
  if (std::string why = FaultFs::unavailable(); !why.empty()) GTEST_SKIP() << why;
  Fixture f;
  ASSERT_TRUE(f.ffs->ok()) << f.ffs->log();
  StackOptions o;
  o.expertd_model = f.ffs->mountpoint();
  DaemonStack s(f.tmp.path(), o);
  s.start(Daemon::kExpertd);
  ASSERT_TRUE(expertd_ready(s, 30)) << s.logs();
  // faultfs takes O_DIRECT opens: the reads are those of a real drive.
  EXPECT_NE(testing::read_file(s.log_path(Daemon::kExpertd, 0)).find("O_DIRECT reads"),
            std::string::npos)
      << s.logs();

  experts::ShmSourceOptions so;
  so.segment = s.segment();
  so.fingerprint = f.ck->fingerprint();
  auto src = experts::ShmExpertSource::create(so, experts::ExpertShape::of(*f.config));
  ASSERT_TRUE(src.ok()) << src.status();
  const int64_t layer = f.config->first_k_dense_replace;
  const int64_t bad = 3, good = 4;
  const uint64_t nbytes = f.index->expert_bytes();
  const checkpoint::ExpertLocation& loc = f.index->at(layer, bad);

  struct Case {
    const char* kind;
    const char* says;  // in expertd's log
  };
  for (const Case& c : {Case{"eio", "Input/output error"}, Case{"short", "short read"}}) {
    SCOPED_TRACE(c.kind);
    f.ffs->set(f.fault(layer, bad, nbytes / 2, 1, c.kind));
    const auto before = expertd_stats(s.expertd_socket());
    const size_t injected = f.ffs->injected();
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::vector<uint8_t> got;
      Status st = fetch(**src, layer, bad, &got, nbytes);
      EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
      EXPECT_NE(msg(st).find(cat("expert ", bad, " of layer ", layer)), std::string::npos) << st;
      EXPECT_NE(msg(st).find("read from the drive failed"), std::string::npos) << st;
      // The other experts are served, with the bytes on the drive.
      st = fetch(**src, layer, good, &got, nbytes);
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_TRUE(got == f.bytes(layer, good));
    }
    // Read again on the second request (not cached, not given up on).
    EXPECT_GE(f.ffs->injected(), injected + 2) << f.ffs->log();
    const auto after = expertd_stats(s.expertd_socket());
    EXPECT_EQ(after.read_errors(), before.read_errors() + 2);
    EXPECT_GE(after.read_io_errors(), before.read_io_errors() + 2);
    const std::string log = testing::read_file(s.log_path(Daemon::kExpertd, 0));
    EXPECT_NE(log.find(cat("read of expert ", bad, " of layer ", layer, " failed: ")),
              std::string::npos)
        << log;
    EXPECT_NE(log.find(f.shard_name(layer, bad) + " at offset "), std::string::npos) << log;
    EXPECT_NE(log.find(cat("the expert at offset ", loc.offset, "): ", c.says)), std::string::npos)
        << log;
  }
  // The fault clears: the next request reads the expert and succeeds.
  f.ffs->clear();
  std::vector<uint8_t> got;
  Status st = fetch(**src, layer, bad, &got, nbytes);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(got == f.bytes(layer, bad));
  EXPECT_TRUE(s.running(Daemon::kExpertd));
  EXPECT_EQ(s.lifetimes(Daemon::kExpertd), 1);
}

json chat(const std::string& text) {
  return {
      {"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", 6}, {"temperature", 0}};
}

// Through the whole stack: a request that needs a faulty range fails with a
// clear error (not a 200 with text), the daemons stay up, and the same
// request gives the undisturbed answer once the fault is cleared.
TEST(ReadFaults, AGatewayRequestFailsClearlyAndSucceedsOnceTheFaultClears) {
  if (std::string why = FaultFs::unavailable(); !why.empty()) GTEST_SKIP() << why;
  Fixture f;
  ASSERT_TRUE(f.ffs->ok()) << f.ffs->log();
  StackOptions o;
  o.expertd_model = f.ffs->mountpoint();
  o.cache_gb = "0.0003";  // two slots: every request reads its experts again
  DaemonStack s(f.tmp.path(), o);
  ASSERT_TRUE(s.start_all()) << s.logs();
  const json body = chat("Tell me about drives.");
  auto r = s.client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string want = json::parse(r->body)["choices"][0]["message"].dump();

  // Every expert of every MoE layer in one shard fails: any prompt needs one.
  std::string table;
  const std::string shard = f.shard_name(f.config->first_k_dense_replace, 0);
  for (int64_t l = f.config->first_k_dense_replace; l < f.config->num_hidden_layers; ++l)
    for (int64_t e = 0; e < f.config->num_experts; ++e)
      if (f.shard_name(l, e) == shard) table += f.fault(l, e, 0, f.index->expert_bytes(), "eio");
  f.ffs->set(table);
  for (int attempt = 0; attempt < 2; ++attempt) {
    r = s.client().Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_GE(r->status, 500) << r->body;
    const json err = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(err.contains("error")) << r->body;
    const std::string m = err["error"]["message"].get<std::string>();
    EXPECT_NE(m.find("could not serve expert"), std::string::npos) << m;
    EXPECT_NE(m.find("read from the drive failed"), std::string::npos) << m;
  }
  // Streaming: an error event, never a normal end.
  json sbody = body;
  sbody["stream"] = true;
  r = s.client().Post("/v1/chat/completions", sbody.dump(), "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_NE(r->body.find("could not serve expert"), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("\"finish_reason\":\"stop\""), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("\"finish_reason\":\"length\""), std::string::npos) << r->body;

  // Counted in /metrics (the gateway polls expertd's stats: wait for it).
  const std::string line = "k3_expert_read_io_errors_total{expertd=\"d0\"} ";
  std::string metric;
  for (int i = 0; i < 100; ++i) {
    auto m = s.client().Get("/metrics");
    ASSERT_TRUE(m);
    const size_t at = m->body.find(line);
    ASSERT_NE(at, std::string::npos) << m->body;
    metric = m->body.substr(at + line.size(), m->body.find('\n', at) - at - line.size());
    if (metric != "0") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(std::stod(metric), 3) << "two requests and a stream, each reading a bad range";
  for (Daemon d : kDaemons) EXPECT_TRUE(s.running(d)) << daemon_name(d) << "\n" << s.logs();

  f.ffs->clear();
  r = s.client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"].dump(), want);
  for (Daemon d : kDaemons) EXPECT_EQ(s.lifetimes(d), 1);
  const auto codes = s.stop_all();
  for (int c : codes) EXPECT_EQ(c, 0) << s.logs();
}

}  // namespace
}  // namespace k3::faults_test
