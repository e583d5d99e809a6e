// k3ctl bench hosts as a real process on the tiny model (real loopback TCP,
// io_uring reads, shared memory, `k3ctl place --apply`): every JSON line
// parses, every metric the issue names is there with its fields and types,
// for 1 and 4 sequences decoded together, and the figures agree with each
// other.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/test_util.h"
#include "tests/tools/k3ctl/json_lines.h"

namespace k3 {
namespace {

using json = nlohmann::json;

std::vector<json> lines(const std::string& out) {
  return testing::json_lines(out);
}

// The line of `metric` (with hosts == `hosts` and sequences == `seqs` when
// >= 0); exactly one.
json one(const std::vector<json>& v, const std::string& metric, int hosts = -1, int seqs = -1) {
  std::vector<json> found;
  for (const json& j : v)
    if (j.at("metric") == metric && (hosts < 0 || j.at("hosts") == hosts) &&
        (seqs < 0 || j.at("sequences") == seqs))
      found.push_back(j);
  EXPECT_EQ(found.size(), 1u) << metric << " hosts=" << hosts << " sequences=" << seqs;
  return found.empty() ? json::object() : found[0];
}

double num(const json& j, const char* key) {
  EXPECT_TRUE(j.contains(key) && j[key].is_number()) << key << " in " << j.dump();
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : -1;
}

TEST(BenchHosts, PrintsDecodeForOneAndTwoHostsWithNetworkAndExpertBytes) {
  testing::TempDir tmp;
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "hosts", "--model",
                                 testing::tiny_model_dir(), "--work-dir", tmp.file("work"),
                                 "--tokens", "3", "--runs", "3", "--io-factor", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> v = lines(r.out);
  for (const json& j : v) {
    ASSERT_TRUE(j.contains("metric") && j["metric"].is_string()) << j.dump();
    ASSERT_TRUE(j.contains("value") && j["value"].is_number()) << j.dump();
    ASSERT_TRUE(j.contains("unit") && j["unit"].is_string()) << j.dump();
    ASSERT_TRUE(j.contains("sequences") &&
                (j["sequences"].is_number_integer() || j["sequences"].is_array()))
        << j.dump();
  }
  // placement, drive ceiling, read limit, expert bytes; per sequence count
  // a compute bound, 2 decode, a speedup and 2 x 2 network lines.
  EXPECT_EQ(v.size(), 4u + 2 * 8u) << r.out;
  EXPECT_GT(num(one(v, "drive_ceiling_gbps"), "value"), 0);

  // The placement wrote two host directories with half the experts each.
  const json place = one(v, "placement");
  ASSERT_TRUE(place["bytes_per_host"].is_array());
  ASSERT_EQ(place["bytes_per_host"].size(), 2u);
  EXPECT_EQ(place["bytes_per_host"][0], place["bytes_per_host"][1]);
  EXPECT_TRUE(std::filesystem::exists(tmp.file("work/host0/model.safetensors.index.json")));
  EXPECT_TRUE(std::filesystem::exists(tmp.file("work/host1/model.safetensors.index.json")));

  const json eb = one(v, "expert_bytes_per_token");
  const double expert_bytes = num(eb, "value");
  EXPECT_EQ(expert_bytes, num(eb, "top_k") * num(eb, "moe_layers") * num(eb, "expert_bytes"));
  EXPECT_GT(expert_bytes, 0);
  const double k = num(eb, "top_k"), layers = num(eb, "moe_layers");

  std::map<int, double> compute, step_union;
  for (int N : {1, 4}) {
    const json cb = one(v, "compute_bound", 1, N);
    compute[N] = num(cb, "value");
    EXPECT_GT(compute[N], 0);
    EXPECT_EQ(cb["unit"], "s/step");
    EXPECT_NEAR(num(cb, "tokens_per_s"), N / compute[N], 1e-9 * N / compute[N]);
    EXPECT_GT(num(cb, "hit_rate"), 0.99) << "every expert the runs use is resident";
    EXPECT_EQ(num(cb, "bytes_read_per_token"), 0);
    step_union[N] = num(cb, "union_experts_per_step");
  }
  // One token's experts are distinct; a batch's union is between one
  // token's and all of them.
  EXPECT_EQ(step_union[1], k * layers);
  EXPECT_GE(step_union[4], k * layers);
  EXPECT_LE(step_union[4], 4 * k * layers);

  const json limit = one(v, "read_limit");
  const double mbps = num(limit, "value");
  EXPECT_GT(mbps, 0);
  EXPECT_EQ(num(limit, "io_factor"), 4);
  // At least --io-factor times the compute bound for every sequence count
  // (more when the drive's ceiling lowers the limit).
  EXPECT_GE(num(limit, "one_host_io_bound_s"), 4 * compute[1] * (1 - 1e-9));
  EXPECT_NEAR(num(limit, "io_over_compute"), num(limit, "one_host_io_bound_s") / compute[1],
              1e-9 * num(limit, "io_over_compute"));
  ASSERT_TRUE(limit["io_over_compute_by_sequences"].is_object());
  for (const char* N : {"1", "4"})
    EXPECT_GE(limit["io_over_compute_by_sequences"].value(N, 0.0), 4 * (1 - 1e-9)) << N;
  EXPECT_LE(2 * mbps, num(limit, "drive_frac") * num(limit, "drive_ceiling_mbps") * (1 + 1e-9));
  EXPECT_NEAR(mbps * 1e6 * num(limit, "one_host_io_bound_s"), expert_bytes, 1e-6 * expert_bytes);

  for (int N : {1, 4}) {
    std::map<int, double> step;
    for (int n : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << N << " sequences, " << n << " hosts");
      const json d = one(v, "decode", n, N);
      step[n] = num(d, "value");
      EXPECT_GT(step[n], 0);
      EXPECT_EQ(d["unit"], "s/step");
      EXPECT_NEAR(num(d, "tokens_per_s"), N / step[n], 1e-9 * N / step[n]);
      EXPECT_NEAR(num(d, "s_per_token"), step[n] / N, 1e-9 * step[n]);
      EXPECT_LT(num(d, "hit_rate"), 1.0) << "caches below a step's share: every step reads";
      ASSERT_TRUE(d["host_hit_rates"].is_array());
      EXPECT_EQ(d["host_hit_rates"].size(), static_cast<size_t>(n));
      EXPECT_EQ(d["host_bytes_read_per_token"].size(), static_cast<size_t>(n));
      for (const json& b : d["host_bytes_read_per_token"]) EXPECT_GT(b.get<double>(), 0);
      EXPECT_LT(num(d, "cache_experts_per_host"), num(d, "step_share_experts_per_host"));
      EXPECT_NEAR(num(d, "step_share_experts_per_host"), step_union[N] / n, 1e-9 * step_union[N]);
      EXPECT_TRUE(d["o_direct"].is_boolean());
      EXPECT_EQ(num(d, "read_limit_mbps"), mbps);
      EXPECT_GT(num(d, "bytes_read_per_token"), 0);
      const double uni = num(d, "union_experts_per_step");
      if (N == 1) {
        EXPECT_EQ(num(d, "experts_requested_per_token"), k * layers) << "top-k per MoE layer";
        EXPECT_EQ(uni, k * layers);
      } else {
        EXPECT_GE(uni, k * layers);
        EXPECT_LE(uni, N * k * layers);
        // Per layer request, each group asks for its own experts: at least
        // the union, over N tokens.
        EXPECT_GE(num(d, "experts_requested_per_token") * N, uni * (1 - 1e-9));
      }
      // One request message per host with work per MoE layer request (the
      // engine counts a message once its write returned: one may land
      // either side of the timed interval's edge, 1/3 per step over 3
      // steps); 4 sequences run in two groups, a request each per layer.
      const double groups = N == 1 ? 1 : 2;
      EXPECT_GE(num(d, "stream_requests_per_step"), groups * layers - 0.34);
      EXPECT_LE(num(d, "stream_requests_per_step"), groups * n * layers + 0.34);
      EXPECT_GT(num(d, "io_bound_s"), 0);
      EXPECT_EQ(num(d, "compute_bound_s"), compute[N]);
      // Each layer request's busiest host owns at least half its new experts
      // (all with one host), so the layer bound is at least the per-host one.
      EXPECT_GE(num(d, "slowest_host_share"), n == 1 ? 1.0 : 0.5);
      EXPECT_LE(num(d, "slowest_host_share"), 1.0);
      if (n == 1) EXPECT_EQ(num(d, "slowest_host_experts_per_step"), uni);
      EXPECT_GE(num(d, "layer_io_bound_s"), num(d, "io_bound_s") * (1 - 1e-9));

      const json net = one(v, "network_bytes_per_token", n, N);
      const double link = num(net, "value");
      EXPECT_GT(link, 0);
      EXPECT_TRUE(net["counted"].is_string());
      ASSERT_TRUE(net["private_netns"].is_boolean());
      const double stream = num(net, "engine_stream_bytes_per_token");
      EXPECT_GT(stream, 0);
      EXPECT_NEAR(num(net, "host_stream_bytes_per_token"), stream, 0.05 * stream)
          << "the engine and the hosts count the same stream bytes (up to the interval's edges)";
      if (net["private_netns"].get<bool>()) {
        // Only this benchmark's connections on lo: every packet once each
        // way of the counters, and the link carries the streams plus headers.
        EXPECT_EQ(num(net, "lo_rx_bytes_per_token"), link);
        EXPECT_GT(link, stream);
      }
      EXPECT_EQ(num(net, "expert_bytes_per_token"), expert_bytes);
      const double union_bytes = num(net, "union_expert_bytes_per_token");
      EXPECT_NEAR(union_bytes, uni * num(eb, "expert_bytes") / N, 1e-9 * union_bytes);
      const json frac = one(v, "network_over_expert_bytes", n, N);
      EXPECT_NEAR(num(frac, "value"), link / expert_bytes, 1e-9 * link / expert_bytes);
      EXPECT_NEAR(num(frac, "over_union_expert_bytes"), link / union_bytes,
                  1e-9 * link / union_bytes);
    }
    const json speed = one(v, "hosts_speedup", -1, N);
    EXPECT_NEAR(num(speed, "value"), step[1] / step[2], 1e-9 * step[1] / step[2]);
    EXPECT_EQ(num(speed, "s_per_step_1_host"), step[1]);
    EXPECT_EQ(num(speed, "s_per_step_2_hosts"), step[2]);
    EXPECT_NEAR(num(speed, "tokens_per_s_2_hosts") / num(speed, "tokens_per_s_1_host"),
                num(speed, "value"), 1e-9 * num(speed, "value"));
    EXPECT_GT(num(speed, "layer_io_bound_speedup"), 1.0);
    EXPECT_LE(num(speed, "layer_io_bound_speedup"), 2.0 + 1e-9);
  }
}

// --layouts half,replicas: a second pair of hosts that each hold every
// expert (the model directory itself), the placement splitting each layer
// step's experts between them: both read, and the lines name their layout.
// With replicas alone nothing is placed (no placement line, no host
// directories written).
TEST(BenchHosts, ReplicasLayoutSplitsEachStepBetweenBothHosts) {
  testing::TempDir tmp;
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "hosts", "--model",
                                 testing::tiny_model_dir(), "--work-dir", tmp.file("work"),
                                 "--tokens", "2", "--runs", "1", "--io-factor", "4", "--sequences",
                                 "1", "--layouts", "half,replicas"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> v = lines(r.out);
  std::map<std::string, json> decode, speedup;
  for (const json& j : v) {
    if (j.at("metric") == "decode") decode[j.at("layout").get<std::string>()] = j;
    if (j.at("metric") == "hosts_speedup") speedup[j.at("layout").get<std::string>()] = j;
  }
  ASSERT_EQ(decode.size(), 3u) << r.out;  // all (1 host), half, replicas
  EXPECT_EQ(decode["all"]["hosts"], 1);
  EXPECT_EQ(decode["replicas"]["hosts"], 2);
  ASSERT_EQ(speedup.size(), 2u) << r.out;
  const json& rep = decode["replicas"];
  ASSERT_EQ(rep["host_bytes_read_per_token"].size(), 2u);
  for (const json& b : rep["host_bytes_read_per_token"])
    EXPECT_GT(b.get<double>(), 0) << "a replica host read nothing: " << rep.dump();
  // A balanced split: the busiest host gets ceil(new / 2) of each request.
  EXPECT_LE(num(rep, "slowest_host_share"), 0.5 + 0.5 / num(rep, "union_experts_per_step") * 4);
  EXPECT_NEAR(num(speedup["replicas"], "s_per_step_2_hosts"), num(rep, "value"), 1e-12);
  EXPECT_EQ(num(speedup["replicas"], "s_per_step_1_host"), num(decode["all"], "value"));
  for (const json& j : v)
    if (j.at("metric") == "network_bytes_per_token" && j.at("layout") == "replicas")
      EXPECT_GT(num(j, "value"), 0);

  auto alone = testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "hosts", "--model",
                                     testing::tiny_model_dir(), "--work-dir", tmp.file("alone"),
                                     "--tokens", "2", "--runs", "1", "--io-factor", "4",
                                     "--sequences", "1", "--layouts", "replicas"});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  int decodes = 0;
  for (const json& j : lines(alone.out)) {
    EXPECT_NE(j.at("metric"), "placement") << "replicas alone placed experts: " << j.dump();
    if (j.at("metric") == "decode") {
      ++decodes;
      EXPECT_TRUE(j.at("layout") == "all" || j.at("layout") == "replicas") << j.dump();
    }
  }
  EXPECT_EQ(decodes, 2) << alone.out;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("alone/host0")));
}

TEST(BenchHosts, RefusesAnUnknownLayout) {
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "hosts", "--model",
                                 testing::tiny_model_dir(), "--layouts", "half,striped"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--layouts"), std::string::npos) << r.err;
}

TEST(BenchHosts, RefusesASequenceCountOfZero) {
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "hosts", "--model",
                                 testing::tiny_model_dir(), "--sequences", "1,0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--sequences"), std::string::npos) << r.err;
}

TEST(BenchHosts, RefusesAnIoFactorBelowTwo) {
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "hosts", "--model",
                                 testing::tiny_model_dir(), "--io-factor", "1.5"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--io-factor"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3
