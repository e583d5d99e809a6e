// Remote expertd on loopback, as real processes: experts computed next to
// the data through RemoteExpertService, logits bit-identical to standalone,
// one stream message per host per MoE layer step, the kernel variant and
// model checks, bytes mode, replicas taking over a killed host, and a lost
// host named in the error and used again once it is back.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <thread>

#include "engined/experts/remote_source.h"
#include "shared/base/cpu_features.h"
#include "shared/checkpoint/model_config.h"
#include "tests/expertd/remote_harness.h"
#include "tools/mkmodel/mkmodel.h"

namespace k3 {

using k3::experts::ExpertSourceStats;

namespace {

using testing::TempDir;
using namespace expertd_test;

const std::vector<std::string> kInsecure = {"--insecure-remote"};

int64_t moe_layers() {
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  return c->num_moe_layers();
}

std::vector<int32_t> tiny_prompt(int n) {
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  return prompt(n, static_cast<int32_t>(c->vocab_size));
}

// One host owning every expert: logits memcmp-equal to standalone, every
// (token, expert) row computed there, one request message per MoE layer
// step, and the bytes on the stream counted on both ends alike.
TEST(RemoteExpertd, LogitsThroughARemoteHostAreBitIdentical) {
  TempDir tmp;
  const auto ids = tiny_prompt(20);
  const auto want = score_standalone(ids);
  RemoteExpertd h(tmp, "rbit", kInsecure, testing::tiny_model_dir());
  ASSERT_TRUE(h.wait_ready()) << h.log();
  const auto d = h.describe();
  EXPECT_TRUE(d.insecure_remote());
  EXPECT_NE(d.warning().find("plaintext"), std::string::npos) << d.warning();
  EXPECT_NE(h.log().find("PLAINTEXT"), std::string::npos);
  Status st;
  ExpertSourceStats es;
  const auto got = score_with(insecure_hosts({{"h1", h.address}}), ids, &st, &es);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  const auto hs = h.stats();
  // One forward pass of the whole prompt: one step per MoE layer.
  EXPECT_EQ(hs.remote_requests(), static_cast<uint64_t>(moe_layers()));
  EXPECT_EQ(es.remote_messages, static_cast<uint64_t>(moe_layers()));
  EXPECT_EQ(hs.remote_rows(),
            static_cast<uint64_t>(ids.size() * c->num_experts_per_token * moe_layers()));
  EXPECT_EQ(hs.remote_streams(), 1u);
  EXPECT_EQ(es.network_bytes, hs.remote_bytes_in() + hs.remote_bytes_out());
  EXPECT_EQ(es.requests, hs.requests());  // every expert read there, none here
}

// Decode: one message per host per MoE layer step, token after token, and
// the greedy ids of standalone.
TEST(RemoteExpertd, OneRequestMessagePerHostPerLayerStep) {
  TempDir tmp;
  const auto ids = tiny_prompt(6);
  Status st;
  engined::ExpertSourceOptions local;
  const auto want = greedy_with(local, ids, 5, &st);
  ASSERT_TRUE(st.ok()) << st;
  RemoteExpertd a(tmp, "rstep-a", kInsecure, testing::tiny_model_dir());
  ASSERT_TRUE(a.wait_ready()) << a.log();
  ExpertSourceStats es;
  const auto got = greedy_with(insecure_hosts({{"a", a.address}}), ids, 5, &st, {}, &es);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, want);
  // Prefill (one step) + 5 decode steps, each through every MoE layer.
  const uint64_t steps = static_cast<uint64_t>((1 + 5) * moe_layers());
  EXPECT_EQ(a.stats().remote_requests(), steps);
  EXPECT_EQ(es.remote_messages, steps);
}

// The host computes with the scalar kernels, the engine with its own: the
// host refuses the request, naming both variants, and nothing is computed.
TEST(RemoteExpertd, AHostWithAnotherKernelVariantRefuses) {
  if (base::kernel_isa() == base::KernelIsa::kScalar)
    GTEST_SKIP() << "this CPU only has the scalar kernels";
  TempDir tmp;
  RemoteExpertd h(tmp, "risa", kInsecure, testing::tiny_model_dir(), "K3_KERNELS=scalar");
  ASSERT_TRUE(h.wait_ready()) << h.log();
  EXPECT_EQ(h.describe().kernel_isa(), "scalar");
  Status st;
  score_with(insecure_hosts({{"scalar-host", h.address}}), tiny_prompt(8), &st);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(msg(st).find("kernel variant mismatch"), std::string::npos) << st;
  EXPECT_NE(msg(st).find("scalar"), std::string::npos) << st;
  EXPECT_NE(msg(st).find(std::string(base::kernel_isa_name(base::kernel_isa()))), std::string::npos)
      << st;
  EXPECT_NE(msg(st).find("scalar-host"), std::string::npos) << st;
  EXPECT_EQ(h.stats().remote_rows(), 0u);
  EXPECT_NE(h.log().find("kernel variant mismatch"), std::string::npos);
}

// A host serving another model (another config) is refused before any
// request, naming it.
TEST(RemoteExpertd, AHostOfAnotherModelIsRefused) {
  TempDir tmp;
  tools::MkModelOptions mo;
  mo.out_dir = tmp.file("other");
  mo.seed = 1;
  mo.overrides["num_experts"] = 12;
  ASSERT_TRUE(tools::make_model(mo).ok());
  RemoteExpertd h(tmp, "rfp", kInsecure, mo.out_dir);
  ASSERT_TRUE(h.wait_ready()) << h.log();
  Status st;
  score_with(insecure_hosts({{"other", h.address}}), tiny_prompt(8), &st);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(msg(st).find("serves another model"), std::string::npos) << st;
  EXPECT_NE(msg(st).find("other (127.0.0.1:"), std::string::npos) << st;
  EXPECT_EQ(h.stats().remote_requests(), 0u);
}

// Bytes mode: the host streams each expert's bytes in chunks, the engine
// computes; logits bit-identical, every byte counted on the link.
TEST(RemoteExpertd, BytesModeIsBitIdentical) {
  TempDir tmp;
  const auto ids = tiny_prompt(16);
  const auto want = score_standalone(ids);
  RemoteExpertd h(tmp, "rbytes", kInsecure, testing::tiny_model_dir());
  ASSERT_TRUE(h.wait_ready()) << h.log();
  auto xo = insecure_hosts({{"h", h.address}});
  xo.remote_bytes = true;
  Status st;
  ExpertSourceStats es;
  const auto got = score_with(xo, ids, &st, &es);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  const auto hs = h.stats();
  EXPECT_EQ(hs.remote_rows(), 0u);
  EXPECT_EQ(hs.remote_bytes_experts(), es.requests);
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  EXPECT_GE(es.network_bytes, es.requests * c->expert_bytes());
  EXPECT_EQ(es.bytes_read, es.requests * c->expert_bytes());
}

// Two replica hosts; one is killed (-9) between two decode steps: the next
// step finds it gone and routes every expert to the other; the greedy ids
// are those of an undisturbed run. (A host lost inside a step, its work
// re-issued within the request, is remote_listener_netns_test's link-down case.)
TEST(RemoteExpertd, AReplicaKilledMidGenerationIsRoutedAround) {
  TempDir tmp;
  const auto ids = tiny_prompt(6);
  Status st;
  const auto want = greedy_with(engined::ExpertSourceOptions{}, ids, 8, &st);
  ASSERT_TRUE(st.ok()) << st;
  RemoteExpertd a(tmp, "rkill-a", kInsecure, testing::tiny_model_dir());
  RemoteExpertd b(tmp, "rkill-b", kInsecure, testing::tiny_model_dir());
  ASSERT_TRUE(a.wait_ready()) << a.log();
  ASSERT_TRUE(b.wait_ready()) << b.log();
  ExpertSourceStats es;
  const auto got = greedy_with(
      insecure_hosts({{"a", a.address}, {"b", b.address}}), ids, 8, &st,
      [&](int i) {
        if (i == 3) ::kill(a.d->proc->pid(), SIGKILL);
      },
      &es);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, want);
  EXPECT_GT(b.stats().remote_requests(), 0u);
}

// A host that hangs (SIGSTOP) inside generation: the step sent to it gets
// no answer within the deadline, and its experts are re-issued on the other
// replica within the same request; greedy ids unchanged.
TEST(RemoteExpertd, AHungHostsWorkIsReissuedWithinTheRequest) {
  TempDir tmp;
  const auto ids = tiny_prompt(6);
  Status st;
  const auto want = greedy_with(engined::ExpertSourceOptions{}, ids, 6, &st);
  ASSERT_TRUE(st.ok()) << st;
  RemoteExpertd a(tmp, "rhang-a", kInsecure, testing::tiny_model_dir());
  RemoteExpertd b(tmp, "rhang-b", kInsecure, testing::tiny_model_dir());
  ASSERT_TRUE(a.wait_ready()) << a.log();
  ASSERT_TRUE(b.wait_ready()) << b.log();
  ExpertSourceStats es;
  const auto got = greedy_with(
      insecure_hosts({{"a", a.address}, {"b", b.address}}, 1500), ids, 6, &st,
      [&](int i) {
        if (i == 2) ::kill(a.d->proc->pid(), SIGSTOP);
      },
      &es);
  ::kill(a.d->proc->pid(), SIGCONT);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, want);
  EXPECT_GT(es.reissued, 0u);
}

// The only owner dies: UNAVAILABLE naming the host; once it is back on the
// same address, requests succeed again (the lost host is polled again).
TEST(RemoteExpertd, TheOnlyOwnerLostIsNamedAndUsedAgainWhenBack) {
  TempDir tmp;
  const auto ids = tiny_prompt(8);
  const auto want = score_standalone(ids);
  auto h = std::make_unique<RemoteExpertd>(tmp, "ronly", kInsecure, testing::tiny_model_dir());
  ASSERT_TRUE(h->wait_ready()) << h->log();
  const std::string address = h->address;
  auto m = engined::Model::load(testing::tiny_model_dir(), {}, engined::EngineOptions{});
  ASSERT_TRUE(m.ok());
  auto experts = engined::make_expert_source(insecure_hosts({{"only", address}}, 2000), **m);
  ASSERT_TRUE(experts.ok()) << experts.status();
  auto run = [&](Status* s) {
    auto seq = (*m)->new_sequence();
    std::vector<float> logits;
    *s = (*m)->forward(**experts, *seq, ids, static_cast<int64_t>(ids.size()), &logits);
    return logits;
  };
  Status st;
  auto got = run(&st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  ::kill(h->d->proc->pid(), SIGKILL);
  h->d->proc->wait_exit(10);
  run(&st);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(msg(st).find("only (" + address + ")"), std::string::npos) << st;
  h.reset();
  RemoteExpertd back(tmp, "ronly2", kInsecure, testing::tiny_model_dir(), "", address);
  ASSERT_TRUE(back.wait_ready()) << back.log();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    got = run(&st);
    if (st.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
}

TEST(RemoteExpertd, FlagsAreChecked) {
  engined::ExpertSourceOptions o;
  EXPECT_FALSE(engined::parse_remote_flags({"nohost"}, &o).ok());
  EXPECT_FALSE(engined::parse_remote_flags({"a=h:0"}, &o).ok());
  o.insecure_remote = true;
  EXPECT_TRUE(engined::parse_remote_flags({"a=127.0.0.1:5"}, &o).ok());
  EXPECT_FALSE(engined::parse_remote_flags({"a=127.0.0.1:5", "a=127.0.0.1:6"}, &o).ok());
  o.insecure_remote = false;
  const Status s = engined::parse_remote_flags({"a=127.0.0.1:5"}, &o);
  EXPECT_NE(msg(s).find("--tls-ca"), std::string::npos) << s;
  o.remote_token_file = "/nonexistent";
  EXPECT_FALSE(engined::parse_remote_flags({}, &o).ok());
}

}  // namespace
}  // namespace k3
