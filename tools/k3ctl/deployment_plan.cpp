#include "tools/k3ctl/deployment_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "shared/status.h"
#include "tools/k3ctl/model_summary.h"

namespace k3::tools {

namespace {

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string gbps_text(double g) {
  return fixed(g, g < 10 ? 2 : 1) + " GB/s";
}

}  // namespace

PlanModel PlanModel::kimi_k3() {
  PlanModel m;
  m.name = "Kimi K3 (published config; no --model)";
  m.moe_layers = 92;  // 93 layers, the first dense
  m.experts = 896;
  m.top_k = 16;
  m.expert_bytes = 17547264;
  return m;
}

uint64_t PlanModel::bytes_per_token() const {
  return static_cast<uint64_t>(moe_layers) * static_cast<uint64_t>(std::min(top_k, experts)) *
         expert_bytes;
}

uint64_t PlanModel::expert_set_bytes() const {
  return static_cast<uint64_t>(moe_layers) * static_cast<uint64_t>(experts) * expert_bytes;
}

uint64_t plan_reserve_bytes(uint64_t ram_total) {
  return std::max<uint64_t>(2'000'000'000ull, ram_total / 10);
}

Plan make_plan(const PlanInput& in) {
  Plan plan;
  const PlanModel& m = in.model;
  const double set = static_cast<double>(m.expert_set_bytes());
  const double per_token = static_cast<double>(m.bytes_per_token());
  const double reserve = static_cast<double>(plan_reserve_bytes(in.ram_total));
  const size_t n_drives = std::max<size_t>(1, in.drives.size());

  // The cache: what --cache-gb said, else what RAM leaves beside the dense
  // part and the reserve, no more than the segment filesystem holds or the
  // experts need.
  std::string cache_detail;
  nlohmann::json cache_fields;
  if (in.cache_gb > 0) {
    plan.cache_gb = in.cache_gb;
    cache_detail = cat("--cache-gb ", fixed(in.cache_gb, 1), " as given");
  } else if (m.dense_bytes) {
    double budget =
        static_cast<double>(in.ram_available) - static_cast<double>(*m.dense_bytes) - reserve;
    budget = std::min({budget, static_cast<double>(in.segment_free) * 0.95, set});
    plan.cache_gb = std::max(0.0, budget) / 1e9;
    cache_detail = cat(si_bytes(static_cast<double>(in.ram_available)), " available - dense part ",
                       si_bytes(static_cast<double>(*m.dense_bytes)), " - ", si_bytes(reserve),
                       " kept free (KV caches, checkpoints, the system)");
    if (static_cast<double>(in.segment_free) * 0.95 < set &&
        plan.cache_gb * 1e9 >= static_cast<double>(in.segment_free) * 0.95 - 1)
      cache_detail += cat("; capped by ", in.segment_dir, "'s ",
                          si_bytes(static_cast<double>(in.segment_free)), " free");
  } else {
    cache_detail = "not sized: pass --model to size the dense part it must leave room for";
  }
  plan.cache_share = set > 0 ? std::min(1.0, plan.cache_gb * 1e9 / set) : 0.0;
  // Per expertd, rounded down to what expertd's --cache-gb is given in.
  // (Up, when the cache holds every expert: the whole set must fit.)
  const double per_expertd =
      plan.cache_share >= 1 ? std::ceil(plan.cache_gb / static_cast<double>(n_drives) * 100) / 100
                            : std::floor(plan.cache_gb / static_cast<double>(n_drives) * 100) / 100;
  cache_fields = {{"cache_gb", plan.cache_gb},
                  {"expertd", n_drives},
                  {"cache_gb_per_expertd", per_expertd},
                  {"cache_share", plan.cache_share}};
  if (per_expertd >= 0.01)
    plan.lines.push_back(
        {"cache",
         cat("expertd --cache-gb ", fixed(per_expertd, per_expertd < 10 ? 2 : 1),
             n_drives > 1 ? cat(" on each of ", n_drives, " expertd (one per drive)") : "", ": ",
             si_bytes(plan.cache_gb * 1e9), " in all, ",
             plan.cache_share >= 1 ? std::string("every routed expert")
                                   : fixed(plan.cache_share * 100, 1) + "% of the routed experts",
             " (", cache_detail, ")"),
         cache_fields});
  else
    plan.lines.push_back(
        {"cache",
         m.dense_bytes || in.cache_gb > 0
             ? cat("no room for an expert cache (", cache_detail,
                   "): every expert is read from the drives; ",
                   m.dense_bytes && static_cast<double>(*m.dense_bytes) >
                                        static_cast<double>(in.ram_available) - reserve
                       ? "the dense part itself needs a machine with more RAM"
                       : "use fewer dense bits or more RAM")
             : cat("expert cache ", cache_detail),
         cache_fields});

  // The drives.
  std::string drives_detail;
  nlohmann::json drives = nlohmann::json::array();
  double slowest = 0;
  size_t measured = 0;
  for (const PlanDrive& d : in.drives) {
    drives_detail += cat(drives_detail.empty() ? "" : "; ", d.dir, " ",
                         d.gbps ? gbps_text(*d.gbps) : std::string("not measured"),
                         d.note.empty() ? "" : cat(" (", d.note, ")"));
    drives.push_back({{"dir", d.dir},
                      {"gbps", d.gbps ? nlohmann::json(*d.gbps) : nlohmann::json()},
                      {"note", d.note}});
    if (d.gbps && *d.gbps > 0) {
      slowest = measured == 0 ? *d.gbps : std::min(slowest, *d.gbps);
      ++measured;
    }
  }
  plan.lines.push_back(
      {"drives",
       in.drives.empty() ? "none given: pass --drive DIR for each drive that holds (or will hold) "
                           "shards to measure it"
                         : drives_detail,
       {{"drives", drives}}});

  // Decode from those rates.
  const double miss_bytes = per_token * (1 - plan.cache_share);
  const std::string bytes_text =
      cat(si_bytes(per_token), " of experts per token (", m.moe_layers, " MoE layers x top ",
          std::min(m.top_k, m.experts), " x ", si_bytes(static_cast<double>(m.expert_bytes)), ")");
  const double for_5s = miss_bytes / 5 / 1e9;
  auto rate_text = [](double g) { return g < 0.01 ? std::string("any rate") : gbps_text(g); };
  nlohmann::json decode = {{"model", m.name},
                           {"bytes_per_token", m.bytes_per_token()},
                           {"read_bytes_per_token", miss_bytes},
                           {"gbps_for_5_s_per_token", for_5s}};
  if (measured > 0) {
    const double aggregate = slowest * static_cast<double>(measured);
    plan.s_per_token = miss_bytes / (aggregate * 1e9);
    const double cold = per_token / (aggregate * 1e9);
    decode["drive_gbps"] = aggregate;
    decode["s_per_token"] = *plan.s_per_token;
    decode["cold_s_per_token"] = cold;
    auto secs = [](double v) { return fixed(v, v < 0.1 ? 4 : v < 10 ? 2 : 1); };
    plan.lines.push_back(
        {"decode",
         cat(plan.cache_share >= 1
                 ? cat("~0 s/token of expert reads once the cache holds every routed expert (",
                       secs(cold), " s/token while it fills)")
                 : cat("~", secs(*plan.s_per_token), " s/token",
                       plan.cache_share > 0 ? cat(" (", secs(cold), " with a cold cache)") : ""),
             " on ", m.name, ": ", bytes_text, ", ", fixed(plan.cache_share * 100, 1),
             "% from the cache, the rest ", si_bytes(miss_bytes), " at ", gbps_text(aggregate),
             " (", measured,
             measured > 1 ? " drives at the slowest one's rate, shards spread evenly" : " drive",
             measured < in.drives.size() ? "; drives not measured left out" : "",
             "); expert reads only, the dense part's compute adds to it; ", rate_text(for_5s),
             " in all would give 5 s/token"),
         decode});
  } else {
    plan.lines.push_back({"decode",
                          cat("no drive rate measured for ", m.name, ": ", bytes_text, "; ",
                              rate_text(for_5s), " of drive reads in all give 5 s/token"),
                          decode});
  }

  // What fits in RAM.
  std::string ram;
  nlohmann::json ram_fields = {{"ram_available", in.ram_available}, {"ram_total", in.ram_total}};
  const double room = static_cast<double>(in.ram_available) - reserve;
  if (m.dense_bytes) {
    ram =
        cat("dense part at ", m.dense_bits, " bits ", si_bytes(static_cast<double>(*m.dense_bytes)),
            static_cast<double>(*m.dense_bytes) <= room ? " fits" : " does NOT fit");
    nlohmann::json options = nlohmann::json::array();
    for (const auto& [bits, bytes] : m.dense_options) {
      const bool fits = static_cast<double>(bytes) <= room;
      options.push_back({{"bits", bits}, {"bytes", bytes}, {"fits", fits}});
      if (bits != m.dense_bits)
        ram += cat("; at ", bits, " ", si_bytes(static_cast<double>(bytes)),
                   fits ? " fits" : " does not");
    }
    ram_fields["dense_bytes"] = *m.dense_bytes;
    ram_fields["dense_options"] = options;
  } else {
    ram = "dense part not sized (no --model)";
  }
  const bool all_experts = set + (m.dense_bytes ? static_cast<double>(*m.dense_bytes) : 0) <= room;
  ram += cat("; the routed experts (", si_bytes(set), ") ",
             all_experts ? "fit too: a cache that holds them all makes decode compute-bound"
                         : "do not: they stream from the drives");
  ram += cat(" (", si_bytes(static_cast<double>(in.ram_available)), " available of ",
             si_bytes(static_cast<double>(in.ram_total)), ", ", si_bytes(reserve), " kept free)");
  ram_fields["experts_fit"] = all_experts;
  plan.lines.push_back({"ram", ram, ram_fields});
  return plan;
}

}  // namespace k3::tools
