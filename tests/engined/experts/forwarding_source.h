// An ExpertSource that forwards every call to the one it owns: tests derive
// from it to record or change one call (what a request asked for, whether a
// source counts as remote).
#pragma once

#include <memory>
#include <utility>

#include "shared/experts/expert_source.h"

namespace k3::engined {

class ForwardingSource : public experts::ExpertSource {
 public:
  explicit ForwardingSource(std::unique_ptr<experts::ExpertSource> inner)
      : inner_(std::move(inner)) {}
  Status submit(const experts::ExpertRequest& r) override { return inner_->submit(r); }
  StatusOr<std::optional<experts::ExpertCompletion>> poll(int timeout_ms) override {
    return inner_->poll(timeout_ms);
  }
  size_t outstanding() const override { return inner_->outstanding(); }
  Status prepare() override { return inner_->prepare(); }
  bool owns(int64_t layer, int64_t expert) const override { return inner_->owns(layer, expert); }
  experts::ExpertSourceStats stats() const override { return inner_->stats(); }
  bool reads_use_host_cores() const override { return inner_->reads_use_host_cores(); }

 protected:
  experts::ExpertSource& inner() { return *inner_; }

 private:
  std::unique_ptr<experts::ExpertSource> inner_;
};

}  // namespace k3::engined
