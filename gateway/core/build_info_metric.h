// k3_build_info{component,version,commit} 1 on /metrics: the gateway's own
// build, engined's (from its Describe) and each expertd's (from its Health),
// the way Prometheus exporters state what runs ("component" as in k3_up).
#pragma once

#include "gateway/core/metric_registry.h"
#include "gateway/core/topology.h"

namespace k3::gateway {

// Registers the family; `topology` must outlive `registry`'s renders.
void register_build_info(MetricRegistry& registry, const Topology& topology);

}  // namespace k3::gateway
