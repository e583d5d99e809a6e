#include "engined/experts/sources.h"

#include "engined/experts/placement_source.h"
#include "engined/experts/pread_source.h"
#include "engined/experts/shm_source.h"

namespace k3::engine {

StatusOr<std::unique_ptr<ExpertSource>> make_expert_source(const ExpertSourceOptions& opt,
                                                           const Model& model) {
  const ExpertShape shape = ExpertShape::of(model.config());
  if (opt.expertd_segments.empty()) {
    PreadSourceOptions po;
    po.cache_bytes = opt.cache_bytes;
    po.threads = opt.loader_threads;
    po.direct = opt.direct_io;
    po.manifest = opt.manifest;
    K3_ASSIGN_OR_RETURN(auto src, PreadExpertSource::open(model.model_dir(), model.extra_dirs(),
                                                          model.config(), po));
    return std::unique_ptr<ExpertSource>(std::move(src));
  }
  std::vector<std::unique_ptr<ExpertSource>> shm;
  for (const std::string& seg : opt.expertd_segments) {
    ShmSourceOptions so;
    so.segment = seg;
    so.fingerprint = model.fingerprint();
    K3_ASSIGN_OR_RETURN(auto src, ShmExpertSource::create(so, shape));
    shm.push_back(std::move(src));
  }
  if (shm.size() == 1) return std::move(shm.front());
  K3_ASSIGN_OR_RETURN(auto placement, PlacementSource::create(std::move(shm)));
  return std::unique_ptr<ExpertSource>(std::move(placement));
}

}  // namespace k3::engine
