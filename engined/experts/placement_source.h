// An ExpertSource composed of several: each expert of a request goes to the
// first source that owns it (the placement), every source gets its share at
// once, and completions are handed out from whichever source has one, so
// one source's reads overlap another's. Stats are the sum of the sources'.
#pragma once

#include <memory>
#include <vector>

#include "engined/experts/expert_source.h"

namespace k3::engine {

class PlacementSource final : public ExpertSource {
 public:
  // In order of preference; at least one.
  static StatusOr<std::unique_ptr<PlacementSource>> create(
      std::vector<std::unique_ptr<ExpertSource>> sources);
  Status submit(const ExpertRequest& request) override;
  StatusOr<std::optional<ExpertCompletion>> poll(int timeout_ms) override;
  size_t outstanding() const override;
  Status prepare() override;
  bool owns(int64_t layer, int64_t expert) const override;
  ExpertSourceStats stats() const override;

 private:
  explicit PlacementSource(std::vector<std::unique_ptr<ExpertSource>> sources);
  // The first source owning the expert, -1 if none.
  int route(int64_t layer, int64_t expert) const;

  std::vector<std::unique_ptr<ExpertSource>> sources_;
  std::vector<std::vector<size_t>> index_of_;  // per source: its work index -> request's
  size_t rr_ = 0;                              // where the next poll starts
};

}  // namespace k3::engine
