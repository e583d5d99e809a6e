// `k3ctl repack`: the adapter over shared/checkpoint/repack.h. Progress with
// ETA on stderr; a JSON summary on stdout.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "shared/checkpoint/repack.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {
namespace {

struct RepackFlags {
  checkpoint::RepackOptions opt;
  std::string shards;
  int bits = 4, mla_bits = 8, head_bits = 8;
};

void add_repack_command(CLI::App& app) {
  auto f = std::make_shared<RepackFlags>();
  auto* cmd = app.add_subcommand(
      "repack",
      "write a container: dense matrices prepared at their bits, experts byte-identical "
      "(shared/checkpoint/container.h)");
  cmd->add_option("--model", f->opt.model_dir, "source checkpoint directory (never written)")
      ->required();
  cmd->add_option("--out", f->opt.out_dir, "container directory (created)")->required();
  cmd->add_option("--bits", f->bits, "KDA/FFN/latent/shared matrices: 4 or 8 (default 4)")
      ->check(CLI::IsMember({4, 8}));
  cmd->add_option("--mla-bits", f->mla_bits, "MLA projections: 4, 8 or 32 (default 8)")
      ->check(CLI::IsMember({4, 8, 32}));
  cmd->add_option("--head-bits", f->head_bits, "lm_head: 4, 8 or 32 (default 8)")
      ->check(CLI::IsMember({4, 8, 32}));
  cmd->add_flag("--dense-only", f->opt.dense_only,
                "only the dense part (a compute node's; experts stay with expertd)");
  cmd->add_option("--shards", f->shards,
                  "output shards A-B to write (1 = dense, then one per MoE layer); disjoint "
                  "ranges may run at once into one --out");
  cmd->add_flag("--verify", f->opt.verify,
                "re-read every expert byte written and compare it with the source");
  cmd->add_flag("--strict", f->opt.strict,
                "refuse a source whose index names missing shards, even of tensors the model "
                "does not use (default: warn)");
  cmd->callback([f] {
    checkpoint::RepackOptions opt = f->opt;
    opt.dense_bits = f->bits;
    opt.mla_bits = f->mla_bits;
    opt.head_bits = f->head_bits;
    if (!f->shards.empty()) {
      auto r = checkpoint::parse_shard_range(f->shards);
      if (!r.ok()) return fail(msg(r.status()));
      opt.first_shard = r->first;
      opt.last_shard = r->second;
    }
    // Test hook (tests/tools/k3ctl/repack_command_test.cpp): stop dead once this many bytes
    // are written, so a test can kill -9 in the middle of a shard.
    uint64_t stall_at = 0;
    if (const char* s = std::getenv("K3CTL_REPACK_STALL_AFTER_BYTES"))
      stall_at = std::strtoull(s, nullptr, 10);
    auto last = std::chrono::steady_clock::now() - std::chrono::seconds(10);
    opt.progress = [&last, stall_at](const checkpoint::RepackProgress& p) {
      if (stall_at > 0 && p.bytes_done >= stall_at) {
        std::fprintf(stderr, "repack: stalled at %llu bytes (K3CTL_REPACK_STALL_AFTER_BYTES)\n",
                     static_cast<unsigned long long>(p.bytes_done));
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      const auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::milliseconds(500) && p.bytes_done < p.bytes_total) return;
      last = now;
      const double rate = p.seconds > 0 ? static_cast<double>(p.bytes_done) / p.seconds : 0;
      const double eta = rate > 0 ? static_cast<double>(p.bytes_total - p.bytes_done) / rate : 0.0;
      std::fprintf(stderr, "repack: shard %lld/%lld, %.1f/%.1f MB, %.0f MB/s, ETA %.1f s\n",
                   static_cast<long long>(p.shard), static_cast<long long>(p.shards),
                   static_cast<double>(p.bytes_done) / 1e6,
                   static_cast<double>(p.bytes_total) / 1e6, rate / 1e6, eta);
    };
    auto r = checkpoint::repack(opt);
    if (!r.ok()) return fail(msg(r.status()));
    for (const std::string& w : r->missing_shard_warnings)
      std::fprintf(stderr, "k3ctl repack: warning: %s\n", w.c_str());
    std::printf("%s\n", nlohmann::json({{"out", opt.out_dir},
                                        {"shards", r->shards},
                                        {"shards_written", r->shards_written},
                                        {"shards_kept", r->shards_kept},
                                        {"shards_complete", r->shards_complete},
                                        {"bytes_written", r->bytes_written},
                                        {"implied_bytes", r->implied_bytes},
                                        {"container_bytes", r->container_bytes},
                                        {"source_bytes", r->source_bytes},
                                        {"experts_verified", r->experts_verified},
                                        {"dropped_tensors", r->dropped_tensors},
                                        {"missing_shards", r->missing_shard_warnings.size()},
                                        {"seconds", r->seconds}})
                            .dump()
                            .c_str());
  });
}

const CommandRegistrar kRepack(add_repack_command);

}  // namespace
}  // namespace k3::tools
