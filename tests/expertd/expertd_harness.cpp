#include "tests/expertd/expertd_harness.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "shared/shm/layout.h"
#include "shared/shm/segment.h"

namespace k3::expertd_test {

using k3::experts::ExpertSourceStats;

std::string unique_segment(const std::string& tag) {
  return "k3test-" + tag + "-" + std::to_string(::getpid());
}

Expertd::Expertd(const testing::TempDir& tmp, const std::string& seg,
                 std::vector<std::string> extra, const std::string& model,
                 const std::vector<std::string>& wrapper) {
  segment = seg;
  socket = tmp.file(seg + ".sock");
  log = tmp.file(seg + ".log");
  std::vector<std::string> argv = {testing::bin_dir() + "/expertd",
                                   "--model",
                                   model,
                                   "--listen",
                                   "unix:" + socket,
                                   "--segment",
                                   seg,
                                   "--cache-gb",
                                   "0.05"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.begin(), wrapper.begin(), wrapper.end());
  proc = std::make_unique<testing::Process>(argv, log);
}

Expertd::~Expertd() {
  if (proc) proc->stop(SIGTERM);
  shm::Segment::remove(segment);
}

// The control socket starts after the segment: ready means both.
bool Expertd::answers_health() const {
  auto stub = k3serve::v1::ExpertService::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  k3serve::v1::HealthResponse h;
  return stub->Health(&ctx, k3serve::v1::HealthRequest(), &h).ok();
}

bool Expertd::wait_ready(double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    auto s = shm::Segment::open(segment);
    if (s.ok() && s->size() >= sizeof(shm::Header) &&
        shm::header_of(s->base())->ready.load() == 1 &&
        shm::header_of(s->base())->magic == shm::kMagic && answers_health())
      return true;
    if (proc->wait_exit(0) >= 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

k3serve::v1::StatsResponse Expertd::stats() const {
  auto stub = k3serve::v1::ExpertService::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  k3serve::v1::StatsResponse st;
  grpc::Status s = stub->Stats(&ctx, k3serve::v1::StatsRequest(), &st);
  if (!s.ok()) ADD_FAILURE() << "Stats: " << s.error_message();
  return st;
}

std::vector<int32_t> prompt(int n, int32_t vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 104729 + 7) % vocab));
  return ids;
}

std::vector<float> score_model(const std::string& model_dir,
                               const std::vector<std::string>& segments,
                               const std::vector<int32_t>& ids, Status* status,
                               ExpertSourceStats* stats) {
  auto m = engined::Model::load(model_dir, {}, engined::EngineOptions{});
  if (!m.ok()) {
    if (status) *status = m.status();
    return {};
  }
  engined::ExpertSourceOptions xo;
  xo.expertd_segments = segments;
  auto experts = engined::make_expert_source(xo, **m);
  if (!experts.ok()) {
    if (status) *status = experts.status();
    return {};
  }
  auto seq = (*m)->new_sequence();
  std::vector<float> logits;
  Status s = (*m)->forward(**experts, *seq, ids, static_cast<int64_t>(ids.size()), &logits);
  if (status) *status = s;
  if (stats) *stats = (*experts)->stats();
  return logits;
}

std::vector<float> score(const std::vector<std::string>& segments, const std::vector<int32_t>& ids,
                         Status* status, ExpertSourceStats* stats) {
  return score_model(testing::tiny_model_dir(), segments, ids, status, stats);
}

std::vector<float> score_standalone(const std::vector<int32_t>& ids) {
  return score({}, ids);
}

}  // namespace k3::expertd_test
