// Helpers of the expertd suites: an expertd process, prompts, and scoring the
// tiny model (or another directory) through expertd segments or standalone.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/experts/expert_source.h"
#include "shared/status.h"
#include "tests/test_util.h"

namespace k3::expertd_test {

// A segment name unique to this test process.
std::string unique_segment(const std::string& tag);

// Starts expertd (on the tiny model unless `model` is given) and stops it
// with SIGTERM on destruction, removing its segment.
struct Expertd {
  std::string segment, socket, log;
  std::unique_ptr<testing::Process> proc;
  // `wrapper` runs it (e.g. {"ip", "netns", "exec", NS}: in a network namespace).
  Expertd(const testing::TempDir& tmp, const std::string& seg, std::vector<std::string> extra = {},
          const std::string& model = testing::tiny_model_dir(),
          const std::vector<std::string>& wrapper = {});
  ~Expertd();
  // Waits until its segment is ready and its control socket answers; false
  // when it exited or timed out.
  bool wait_ready(double seconds = 30);
  bool answers_health() const;
  // Its Stats over the control socket.
  k3serve::v1::StatsResponse stats() const;
};

std::vector<int32_t> prompt(int n, int32_t vocab);

// Every position's logits of `ids` on the model in `model_dir`, its experts
// from `segments` (none: read in-process).
std::vector<float> score_model(const std::string& model_dir,
                               const std::vector<std::string>& segments,
                               const std::vector<int32_t>& ids, Status* status = nullptr,
                               experts::ExpertSourceStats* stats = nullptr);
// The same on the tiny model.
std::vector<float> score(const std::vector<std::string>& segments, const std::vector<int32_t>& ids,
                         Status* status = nullptr, experts::ExpertSourceStats* stats = nullptr);
std::vector<float> score_standalone(const std::vector<int32_t>& ids);

}  // namespace k3::expertd_test
