// k3ctl bench hosts as a real process on the tiny model (real loopback TCP,
// io_uring reads, shared memory, `k3ctl place --apply`): every JSON line
// parses, every metric the issue names is there with its fields and types,
// and the figures agree with each other.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;

std::vector<json> lines(const std::string& out) {
  std::vector<json> v;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.empty()) continue;
    v.push_back(json::parse(line));  // throws (fails the test) on a bad line
  }
  return v;
}

// The line of `metric` (with hosts == `hosts` when >= 0); exactly one.
json one(const std::vector<json>& v, const std::string& metric, int hosts = -1) {
  std::vector<json> found;
  for (const json& j : v)
    if (j.at("metric") == metric && (hosts < 0 || j.at("hosts") == hosts)) found.push_back(j);
  EXPECT_EQ(found.size(), 1u) << metric << " hosts=" << hosts;
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
  }
  EXPECT_EQ(v.size(), 12u) << r.out;
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

  const json cb = one(v, "compute_bound");
  const double compute = num(cb, "value");
  EXPECT_GT(compute, 0);
  EXPECT_GT(num(cb, "hit_rate"), 0.99) << "every expert the runs use is resident";
  EXPECT_EQ(num(cb, "bytes_read_per_token"), 0);

  const json limit = one(v, "read_limit");
  const double mbps = num(limit, "value");
  EXPECT_GT(mbps, 0);
  EXPECT_EQ(num(limit, "io_factor"), 4);
  // At least --io-factor times the compute bound (more when the drive's
  // ceiling lowers the limit).
  EXPECT_GE(num(limit, "one_host_io_bound_s"), 4 * compute * (1 - 1e-9));
  EXPECT_NEAR(num(limit, "io_over_compute"), num(limit, "one_host_io_bound_s") / compute,
              1e-9 * num(limit, "io_over_compute"));
  EXPECT_LE(2 * mbps, num(limit, "drive_frac") * num(limit, "drive_ceiling_mbps") * (1 + 1e-9));
  EXPECT_NEAR(mbps * 1e6 * num(limit, "one_host_io_bound_s"), expert_bytes, 1e-6 * expert_bytes);

  std::map<int, double> s_per_token;
  for (int n : {1, 2}) {
    const json d = one(v, "decode", n);
    s_per_token[n] = num(d, "value");
    EXPECT_GT(s_per_token[n], 0);
    EXPECT_NEAR(num(d, "tokens_per_s"), 1 / s_per_token[n], 1e-9 / s_per_token[n]);
    EXPECT_LT(num(d, "hit_rate"), 1.0) << "caches below a step's share: every step reads";
    ASSERT_TRUE(d["host_hit_rates"].is_array());
    EXPECT_EQ(d["host_hit_rates"].size(), static_cast<size_t>(n));
    EXPECT_EQ(d["host_bytes_read_per_token"].size(), static_cast<size_t>(n));
    for (const json& b : d["host_bytes_read_per_token"]) EXPECT_GT(b.get<double>(), 0) << n;
    EXPECT_LT(num(d, "cache_experts_per_host"), num(d, "step_share_experts_per_host"));
    EXPECT_NEAR(num(d, "step_share_experts_per_host"), k * layers / n, 1e-9);
    EXPECT_TRUE(d["o_direct"].is_boolean());
    EXPECT_EQ(num(d, "read_limit_mbps"), mbps);
    EXPECT_GT(num(d, "bytes_read_per_token"), 0);
    EXPECT_EQ(num(d, "experts_requested_per_token"), k * layers) << "top-k per MoE layer";
    // One request message per host with work per MoE layer step (the engine
    // counts a message once its write returned: one may land either side of
    // the timed interval's edge, 1/3 per token over 3 tokens).
    EXPECT_GE(num(d, "stream_requests_per_token"), layers - 0.34);
    EXPECT_LE(num(d, "stream_requests_per_token"), n * layers + 0.34);
    EXPECT_GT(num(d, "io_bound_s"), 0);
    EXPECT_EQ(num(d, "compute_bound_s"), compute);
    // Each layer step's busiest host owns at least half its experts (all
    // with one host), so the layer bound is at least the per-token one.
    EXPECT_GE(num(d, "slowest_host_share"), n == 1 ? 1.0 : 0.5);
    EXPECT_LE(num(d, "slowest_host_share"), 1.0);
    if (n == 1) {
      EXPECT_EQ(num(d, "slowest_host_experts_per_token"), k * layers);
    }
    EXPECT_GE(num(d, "layer_io_bound_s"), num(d, "io_bound_s") * (1 - 1e-9));

    const json net = one(v, "network_bytes_per_token", n);
    const double link = num(net, "value");
    EXPECT_GT(link, 0);
    EXPECT_TRUE(net["counted"].is_string());
    ASSERT_TRUE(net["private_netns"].is_boolean());
    const double stream = num(net, "engine_stream_bytes_per_token");
    EXPECT_GT(stream, 0);
    EXPECT_NEAR(num(net, "host_stream_bytes_per_token"), stream, 0.05 * stream)
        << "the engine and the hosts count the same stream bytes (up to the interval's edges)";
    if (net["private_netns"].get<bool>()) {
      // Only this benchmark's connections on lo: every packet once each way
      // of the counters, and the link carries the streams plus headers.
      EXPECT_EQ(num(net, "lo_rx_bytes_per_token"), link);
      EXPECT_GT(link, stream);
    }
    const json frac = one(v, "network_over_expert_bytes", n);
    EXPECT_NEAR(num(frac, "value"), link / expert_bytes, 1e-9 * link / expert_bytes);
  }
  const json speed = one(v, "hosts_speedup");
  EXPECT_NEAR(num(speed, "value"), s_per_token[1] / s_per_token[2],
              1e-9 * s_per_token[1] / s_per_token[2]);
  EXPECT_EQ(num(speed, "s_per_token_1_host"), s_per_token[1]);
  EXPECT_EQ(num(speed, "s_per_token_2_hosts"), s_per_token[2]);
  EXPECT_GT(num(speed, "layer_io_bound_speedup"), 1.0);
  EXPECT_LE(num(speed, "layer_io_bound_speedup"), 2.0 + 1e-9);
}

TEST(BenchHosts, RefusesAnIoFactorBelowTwo) {
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "hosts", "--model",
                                 testing::tiny_model_dir(), "--io-factor", "1.5"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--io-factor"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3
