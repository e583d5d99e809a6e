#include "gateway/core/build_info_metric.h"

#include "shared/base/version.h"

namespace k3::gateway {

void register_build_info(MetricRegistry& registry, const Topology& topology) {
  registry.callback_gauge(
      "k3_build_info",
      "The version and git commit each component was built from (1; a daemon that has not "
      "answered yet is absent)",
      {"component", "version", "commit"}, [&topology] {
        std::vector<CallbackSample> out;
        out.push_back({{"gateway", base::version(), base::git_commit()}, 1.0});
        if (auto b = topology.engine_build())
          out.push_back({{"engined", b->version, b->commit}, 1.0});
        for (const auto& s : topology.snapshot())
          if (!s.build.version.empty())
            out.push_back({{"expertd/" + s.entry.name, s.build.version, s.build.commit}, 1.0});
        return out;
      });
}

}  // namespace k3::gateway
