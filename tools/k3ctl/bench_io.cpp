// k3ctl bench io: expert streaming throughput, in one run, next to the drive's
// ceiling measured the same way:
//   raw_read_gbps   io_uring O_DIRECT reads of the same expert byte ranges at
//                   the best queue depth found (the ceiling);
//   expertd_gbps    a SegmentServer (expertd's data plane, shared memory +
//                   io_uring) serving a random expert stream to a client
//                   through the segment, batches of top-k experts like decode,
//                   in --rounds windows, each paired with a window of raw
//                   reads at that queue depth (raw first in even rounds,
//                   expertd first in odd ones): cloud and consumer drives
//                   drift within seconds (burst credits, thermal), so
//                   expertd is compared with the raw reads of the same
//                   moments (frac_of_raw), not with a ceiling from before.
//                   The raw windows read one continuing stream of new
//                   expert ranges, as expertd's stream is, not the same
//                   ranges again each window;
//   engined_*       engined's decode path through that segment: expert bytes
//                   per second and the share of decode time spent waiting.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "expertd/segment_server.h"
#include "expertd/shard_set.h"
#include "shared/base/log.h"
#include "shared/experts/shm_source.h"
#include "shared/shm/segment.h"
#include "tools/k3ctl/commands.h"
#include "tools/k3ctl/drive_ceiling.h"
#include "tools/k3ctl/huge_page_mix.h"

namespace k3::tools {

using k3::checkpoint::Checkpoint;
using k3::checkpoint::ExpertIndex;
using k3::checkpoint::ModelConfig;

using k3::experts::ExpertShape;
using k3::experts::fetch_bytes;
using k3::experts::ShmExpertSource;
using k3::experts::ShmSourceOptions;

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void emit(nlohmann::json j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

struct IoOptions {
  std::string model;
  double seconds = 5;
  double cache_gb = 0.5;
  std::string segment_dir;  // "" = /dev/shm
  uint64_t chunk = 4u << 20;
  int rounds = 5;
  int engine_tokens = 4;
};

// Random (layer, expert) stream over the MoE layers.
struct Stream {
  std::mt19937_64 rng{1234};
  int64_t first, layers, experts;
  std::pair<int64_t, int64_t> next() {
    return {first + static_cast<int64_t>(rng() % layers), static_cast<int64_t>(rng() % experts)};
  }
};

}  // namespace

namespace {

void run_bench_io(const IoOptions& o) {
  base::set_log_level("warn");
  auto shards = expertd::ShardSet::open(o.model, {});
  if (!shards.ok()) return fail(msg(shards.status()));
  const ModelConfig& c = (*shards)->config();
  const ExpertIndex& idx = (*shards)->index();
  const double model_expert_gb = c.num_moe_layers() * c.num_experts * idx.expert_bytes() / 1e9;
  emit({{"metric", "expert_set_gb"},
        {"value", model_expert_gb},
        {"unit", "GB"},
        {"expert_bytes", idx.expert_bytes()},
        {"cache_gb", o.cache_gb}});

  // (a) the drive's ceiling. One stream for every raw window: each goes on
  // to new expert ranges, as expertd's stream does, instead of reading the
  // first window's ranges again. The raw reads land in one buffer kept for
  // the whole run, a segment of its own beside expertd's (same directory,
  // same kind of pages): on a virtual machine a read's rate can depend on
  // the pages it lands in (measured here: 1.1-2.9 GB/s into 4 KiB shared
  // memory pages from one process to the next, 2.4-2.8 into huge pages).
  // The buffer holds as many chunks as expertd's cache, between kMaxQd and
  // kMaxRawBytes' worth, and the reads take them in turn, as expertd's reads
  // spread over its slots, instead of riding on the few chunks of one queue
  // depth (a large --cache-gb does not double its memory).
  constexpr int kMaxQd = 64;
  constexpr uint64_t kMaxRawBytes = 1ull << 30;
  const int raw_chunks = static_cast<int>(
      std::clamp<uint64_t>(static_cast<uint64_t>(o.cache_gb * 1e9), kMaxQd * o.chunk,
                           std::max<uint64_t>(kMaxRawBytes, kMaxQd * o.chunk)) /
      o.chunk);
  // The pages both buffers will take, mixed first (huge_page_mix.h: on a
  // virtual machine the free list's order alone moved frac_of_raw by
  // +-10 % from run to run). A no-op outside hugetlbfs.
  const uint64_t cache_bytes = static_cast<uint64_t>(o.cache_gb * 1e9);
  auto mixed = mix_free_huge_pages(
      o.segment_dir.empty() ? "/dev/shm" : o.segment_dir,
      static_cast<uint64_t>(raw_chunks) * o.chunk + cache_bytes + (64u << 20), ::getpid());
  if (!mixed.ok()) return fail(msg(mixed.status()));
  const std::string raw_name = shm::segment_ref(o.segment_dir, cat("k3bench-raw-", ::getpid()));
  auto raw_buffer = shm::Segment::create(raw_name, static_cast<uint64_t>(raw_chunks) * o.chunk);
  if (!raw_buffer.ok()) return fail(msg(raw_buffer.status()));
  struct RemoveAtExit {
    std::string name;
    ~RemoveAtExit() { shm::Segment::remove(name); }
  } remove_raw{raw_name};
  std::vector<uint8_t*> raw_dests;
  for (int i = 0; i < raw_chunks; ++i)
    raw_dests.push_back(static_cast<uint8_t*>(raw_buffer->base()) +
                        static_cast<uint64_t>(i) * o.chunk);
  ExpertRangeStream raw_stream(idx, c, o.chunk);
  double best = 0;
  int best_qd = 0;
  for (int qd : {4, 16, kMaxQd}) {
    auto g = raw_read_gbps((*shards)->checkpoint(), raw_stream, qd, o.seconds / 3,
                           /*direct=*/true, raw_dests);
    if (!g.ok()) return fail(msg(g.status()));
    emit({{"metric", "raw_read_gbps_at_qd"},
          {"qd", qd},
          {"chunk", o.chunk},
          {"value", *g},
          {"unit", "GB/s"}});
    if (*g > best) best = *g, best_qd = qd;
  }
  emit({{"metric", "raw_read_gbps"}, {"qd", best_qd}, {"value", best}, {"unit", "GB/s"}});

  // (b) expertd's data plane serving a random stream through shared memory.
  expertd::SegmentServerOptions so;
  so.segment = shm::segment_ref(o.segment_dir, cat("k3bench-", ::getpid()));
  so.cache_bytes = cache_bytes;
  // expertd as it runs: its default queue depth (the raw reads' best one
  // when deeper). A batch-at-a-time client leaves a shallow queue idle at
  // each batch's tail, which raw reads never are.
  so.queue_depth = std::max(best_qd, expertd::SegmentServerOptions{}.queue_depth);
  so.read_chunk_bytes = o.chunk;
  auto server = expertd::SegmentServer::start(**shards, so);
  if (!server.ok()) return fail(msg(server.status()));
  ShmSourceOptions co;
  co.segment = so.segment;
  co.fingerprint = (*shards)->checkpoint().fingerprint();
  {
    auto src = ShmExpertSource::create(co, ExpertShape::of(c));
    if (!src.ok()) return fail(msg(src.status()));
    Stream s{std::mt19937_64(7), c.first_k_dense_replace, c.num_moe_layers(), c.num_experts};
    const int64_t k = std::min<int64_t>(c.num_experts_per_token, c.num_experts);
    const double window = o.seconds / o.rounds;
    uint64_t delivered = 0;
    volatile uint8_t sink = 0;
    // The expert stream for `seconds`; the drive's bytes read meanwhile.
    auto expertd_window = [&](double seconds) -> StatusOr<double> {
      const auto before = (*server)->stats();
      const auto t0 = Clock::now();
      while (secs(t0) < seconds) {
        const int64_t layer = s.next().first;
        std::vector<int64_t> ids;
        while (static_cast<int64_t>(ids.size()) < k) {
          int64_t e = s.next().second;
          if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
        }
        K3_RETURN_IF_ERROR(fetch_bytes(**src, layer, ids, [&](size_t, const uint8_t* d) {
          sink = sink + d[0] + d[idx.expert_bytes() - 1];
          delivered += idx.expert_bytes();
          return absl::OkStatus();
        }));
      }
      return ((*server)->stats().bytes_read - before.bytes_read) / secs(t0) / 1e9;
    };
    const auto before = (*server)->stats();
    double raw_sum = 0, read_sum = 0, expertd_s = 0;
    std::vector<double> fracs;
    nlohmann::json pairs = nlohmann::json::array();
    // Rounds alternate which of the pair goes first (raw, expertd, expertd,
    // raw, ...): a drive whose rate drifts through the run favours neither.
    for (int r = 0; r < o.rounds; ++r) {
      const bool raw_first = r % 2 == 0;
      StatusOr<double> raw = 0.0, read = 0.0;
      auto raw_window = [&] {
        raw = raw_read_gbps((*shards)->checkpoint(), raw_stream, best_qd, window,
                            /*direct=*/true, raw_dests);
      };
      if (raw_first) raw_window();
      if (!raw.ok()) return fail(msg(raw.status()));
      const auto t0 = Clock::now();
      read = expertd_window(window);
      if (!read.ok()) return fail(msg(read.status()));
      expertd_s += secs(t0);
      if (!raw_first) raw_window();
      if (!raw.ok()) return fail(msg(raw.status()));
      raw_sum += *raw;
      read_sum += *read;
      fracs.push_back(*raw > 0 ? *read / *raw : 0.0);
      pairs.push_back({{"raw_gbps", *raw},
                       {"expertd_read_gbps", *read},
                       {"first", raw_first ? "raw" : "expertd"}});
    }
    const auto after = (*server)->stats();
    std::sort(fracs.begin(), fracs.end());
    const double raw_mean = raw_sum / o.rounds, read_mean = read_sum / o.rounds;
    emit({{"metric", "raw_read_gbps_interleaved"},
          {"qd", best_qd},
          {"value", raw_mean},
          {"unit", "GB/s"},
          {"rounds", o.rounds},
          {"window_s", window}});
    emit({{"metric", "expertd_gbps"},
          {"value", delivered / expertd_s / 1e9},
          {"unit", "GB/s"},
          {"drive_read_gbps", read_mean},
          {"miss_rate", (after.misses - before.misses) /
                            std::max(1.0, double(after.requests - before.requests))},
          {"expertd_qd", so.queue_depth},
          {"huge_pages_mixed", *mixed},
          {"read_p50_ms", after.p50_ms},
          {"read_p99_ms", after.p99_ms},
          {"raw_ceiling_gbps", raw_mean},
          {"frac_of_raw", raw_mean > 0 ? read_mean / raw_mean : 0.0},
          {"frac_of_raw_median", fracs[fracs.size() / 2]},
          {"rounds", pairs}});
  }

  // (c) engined's decode path through the same segment.
  {
    engined::ExpertSourceOptions xo;
    xo.expertd_segments = {so.segment};
    auto model = engined::Model::load(o.model, {}, {});
    if (!model.ok()) return fail(msg(model.status()));
    auto experts = engined::make_expert_source(xo, **model);
    if (!experts.ok()) return fail(msg(experts.status()));
    auto seq = (*model)->new_sequence();
    std::vector<float> logits;
    Status st = (*model)->forward(**experts, *seq, {1}, 1, &logits);
    if (!st.ok()) return fail(msg(st));
    const auto t_before = (*model)->times();
    const auto s_before = (*server)->stats();
    const auto t0 = Clock::now();
    std::mt19937_64 rng(3);
    int tokens = 0;
    for (; tokens < o.engine_tokens; ++tokens) {
      st = (*model)->forward(**experts, *seq, {static_cast<int32_t>(rng() % c.vocab_size)}, 1,
                             &logits);
      if (!st.ok()) return fail(msg(st));
    }
    const double el = secs(t0);
    const auto t_after = (*model)->times();
    const auto s_after = (*server)->stats();
    const double bytes = static_cast<double>(s_after.bytes_read - s_before.bytes_read);
    const double wait = t_after.expert_wait_seconds - t_before.expert_wait_seconds;
    const double io = s_after.read_seconds - s_before.read_seconds;
    emit({{"metric", "engined_decode_expert_gbps"},
          {"value", bytes / el / 1e9},
          {"unit", "GB/s"},
          {"tokens", tokens},
          {"s_per_token", el / tokens}});
    emit({{"metric", "engined_io_wait_frac"},
          {"value", io > 0 ? wait / io : 0.0},
          {"unit", "fraction of expert I/O time"},
          {"wait_s", wait},
          {"io_busy_s", io},
          {"decode_s", el},
          {"attention_s", t_after.attention_seconds - t_before.attention_seconds},
          {"dense_s", t_after.dense_seconds - t_before.dense_seconds},
          {"expert_compute_s", t_after.expert_compute_seconds - t_before.expert_compute_seconds}});
  }
  (*server)->stop();
}

void add_bench_io(CLI::App& app) {
  auto o = std::make_shared<IoOptions>();
  auto* cmd =
      bench_command(app)->add_subcommand("io", "expert streaming: raw drive, expertd, engined");
  cmd->add_option("--model", o->model, "model directory (a k3-slice checkpoint)")->required();
  cmd->add_option("--seconds", o->seconds,
                  "seconds per measurement (expertd's and the raw reads beside it each take this "
                  "long in all, split into --rounds windows)")
      ->check(CLI::Range(0.5, 600.0));
  cmd->add_option("--rounds", o->rounds,
                  "alternating windows of raw reads and expertd reads (each window --seconds / "
                  "--rounds, at least 0.1 s)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--cache-gb", o->cache_gb,
                  "expertd slot budget (keep it far below the expert set)");
  cmd->add_option("--segment-dir", o->segment_dir,
                  "put expertd's segment and the raw reads' buffer in this directory instead of "
                  "/dev/shm (e.g. a hugetlbfs mount, as expertd --segment-dir)");
  cmd->add_option("--engine-tokens", o->engine_tokens, "decode steps for the engined measurement")
      ->check(CLI::Range(1, 10000));
  cmd->callback([o] {
    if (o->seconds / o->rounds < 0.1)
      return fail(cat("--seconds / --rounds is ", o->seconds / o->rounds,
                      " s: each window must be at least 0.1 s"));
    run_bench_io(*o);
  });
}

const CommandRegistrar kBenchIo(add_bench_io);

}  // namespace
}  // namespace k3::tools
