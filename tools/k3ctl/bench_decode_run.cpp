#include "tools/k3ctl/bench_decode_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "engined/experts/source_factory.h"
#include "shared/base/log.h"
#include "shared/shm/read_span.h"
#include "tools/k3ctl/drive_ceiling.h"

namespace k3::tools {

using k3::checkpoint::ModelConfig;

using Clock = std::chrono::steady_clock;

void emit(const nlohmann::json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

engined::SpeculationMode speculation_mode(const std::string& s) {
  return s == "on"    ? engined::SpeculationMode::kOn
         : s == "off" ? engined::SpeculationMode::kOff
                      : engined::SpeculationMode::kAuto;
}

double demand_bytes(const experts::ExpertSourceStats& d, uint64_t expert_bytes) {
  return static_cast<double>(d.bytes_read) +
         static_cast<double>(d.speculative_hits) * static_cast<double>(expert_bytes);
}

StatusOr<DecodeRun> decode_run(engined::Model& m, experts::ExpertSource& src, int tokens, int salt,
                               const std::function<void()>& at_start,
                               const std::function<void()>& at_end, int prompt_tokens) {
  auto seq = m.new_sequence();
  std::vector<float> logits;
  const int32_t V = static_cast<int32_t>(m.config().vocab_size);
  std::vector<int32_t> prompt = {(1 + salt) % V, (7 + 3 * salt) % V, (11 + 5 * salt) % V};
  prompt.resize(static_cast<size_t>(std::clamp(prompt_tokens, 1, 3)));
  K3_RETURN_IF_ERROR(m.forward(src, *seq, prompt, 1, &logits));
  if (at_start) at_start();
  const experts::ExpertSourceStats before = src.stats();
  const auto t0 = Clock::now();
  for (int i = 0; i < tokens; ++i) {
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    K3_RETURN_IF_ERROR(m.forward(src, *seq, {next}, 1, &logits));
  }
  DecodeRun r;
  r.s_per_token = std::chrono::duration<double>(Clock::now() - t0).count() / tokens;
  r.d = src.stats() - before;
  if (at_end) at_end();
  return r;
}

StatusOr<DecodeRun> decode_batch_run(engined::Model& m, experts::ExpertSource& src, int n,
                                     int tokens, int salt, const std::function<void()>& at_start,
                                     const std::function<void()>& at_end, int prompt_tokens) {
  if (n < 1) return absl::InvalidArgumentError(cat("sequences ", n, " is below 1"));
  const int32_t V = static_cast<int32_t>(m.config().vocab_size);
  std::vector<std::unique_ptr<engined::SequenceState>> seqs;
  std::vector<engined::Model::Piece> pieces(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    seqs.push_back(m.new_sequence());
    engined::Model::Piece& p = pieces[static_cast<size_t>(i)];
    p.seq = seqs.back().get();
    p.ids = {(1 + salt + 13 * i) % V, (7 + 3 * salt + 17 * i) % V, (11 + 5 * salt + 19 * i) % V};
    p.ids.resize(static_cast<size_t>(std::clamp(prompt_tokens, 1, 3)));
    p.want_logits = true;
  }
  std::vector<float> logits;
  K3_RETURN_IF_ERROR(m.forward_batch(src, pieces, &logits));
  const size_t vocab = static_cast<size_t>(V);
  auto next_ids = [&] {
    for (size_t i = 0; i < pieces.size(); ++i) {
      const float* row = logits.data() + i * vocab;
      pieces[i].ids = {static_cast<int32_t>(std::max_element(row, row + vocab) - row)};
    }
  };
  if (at_start) at_start();
  const experts::ExpertSourceStats before = src.stats();
  const auto t0 = Clock::now();
  for (int t = 0; t < tokens; ++t) {
    next_ids();
    K3_RETURN_IF_ERROR(m.forward_batch(src, pieces, &logits));
  }
  DecodeRun r;
  r.s_per_token = std::chrono::duration<double>(Clock::now() - t0).count() / tokens;
  r.d = src.stats() - before;
  if (at_end) at_end();
  return r;
}

StatusOr<nlohmann::json> ceiling_line(const expertd::ShardSet& shards, int queue_depth,
                                      uint64_t chunk, double seconds, bool direct, const char* when,
                                      const nlohmann::json& extra) {
  const ModelConfig& c = shards.config();
  StatusOr<double> g =
      raw_read_gbps(shards.checkpoint(), shards.index(), c, queue_depth, chunk, seconds, direct);
  bool o_direct = direct;
  if (!g.ok() && direct && g.status().code() == absl::StatusCode::kFailedPrecondition) {
    o_direct = false;
    g = raw_read_gbps(shards.checkpoint(), shards.index(), c, queue_depth, chunk, seconds, false);
  }
  if (!g.ok()) return g.status();
  nlohmann::json j = {{"metric", "drive_ceiling_gbps"},
                      {"drive", direct ? "direct" : "page_cache"},
                      {"when", when},
                      {"o_direct", o_direct},
                      {"qd", queue_depth},
                      {"value", *g},
                      {"unit", "GB/s"}};
  if (extra.is_object()) j.update(extra);
  emit(j);
  return j;
}

StatusOr<BenchServer> start_bench_server(const expertd::ShardSet& shards,
                                         const BenchServerOptions& o) {
  expertd::SegmentServerOptions so;
  so.segment = cat("k3bench-", o.tag, "-", ::getpid());
  so.cache_bytes = o.slots * shm::expert_slot_stride(shards.index().expert_bytes());
  so.queue_depth = o.queue_depth;
  so.read_chunk_bytes = o.chunk;
  so.direct = o.direct;
  so.read_limit_mbps = o.read_limit_mbps;
  BenchServer s;
  s.segment = so.segment;
  K3_ASSIGN_OR_RETURN(s.server, expertd::SegmentServer::start(shards, so));
  return s;
}

StatusOr<std::unique_ptr<experts::ExpertSource>> shm_source(const BenchServer& s,
                                                            const engined::Model& m) {
  engined::ExpertSourceOptions xo;
  xo.expertd_segments = {s.segment};
  return engined::make_expert_source(xo, m);
}

Status warm_all(experts::ExpertSource& src, const ModelConfig& c) {
  K3_RETURN_IF_ERROR(src.prepare());
  for (int64_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l) {
    std::vector<int64_t> ids;
    for (int64_t e = 0; e < c.num_experts; ++e)
      if (src.owns(l, e)) ids.push_back(e);
    for (size_t i = 0; i < ids.size(); i += 512) {
      std::vector<int64_t> part(
          ids.begin() + static_cast<std::ptrdiff_t>(i),
          ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), i + 512)));
      K3_RETURN_IF_ERROR(experts::fetch_bytes(
          src, l, part, [](size_t, const uint8_t*) { return absl::OkStatus(); }));
    }
  }
  return absl::OkStatus();
}

}  // namespace k3::tools
