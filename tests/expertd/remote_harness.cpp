#include "tests/expertd/remote_harness.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "engined/model/model.h"

namespace k3::expertd_test {

using k3::experts::ExpertSourceStats;

RemoteExpertd::RemoteExpertd(const testing::TempDir& tmp, const std::string& tag,
                             std::vector<std::string> remote_flags, const std::string& model,
                             const std::string& env, const std::string& listen,
                             const std::vector<std::string>& wrapper) {
  std::vector<std::string> extra = {"--remote-listen", listen};
  extra.insert(extra.end(), remote_flags.begin(), remote_flags.end());
  // The child inherits the environment it is forked with.
  std::string name, value;
  if (!env.empty()) {
    name = env.substr(0, env.find('='));
    value = env.substr(env.find('=') + 1);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  d = std::make_unique<Expertd>(tmp, unique_segment(tag), extra, model, wrapper);
  if (!env.empty()) ::unsetenv(name.c_str());
}

k3serve::v1::DescribeResponse RemoteExpertd::describe() const {
  auto stub = k3serve::v1::ExpertService::NewStub(
      grpc::CreateChannel("unix:" + d->socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  k3serve::v1::DescribeResponse out;
  grpc::Status s = stub->Describe(&ctx, k3serve::v1::DescribeRequest(), &out);
  if (!s.ok()) ADD_FAILURE() << "Describe: " << s.error_message();
  return out;
}

bool RemoteExpertd::wait_ready(double seconds) {
  if (!d->wait_ready(seconds)) return false;
  address = describe().remote_listen();
  return !address.empty();
}

engined::ExpertSourceOptions insecure_hosts(
    const std::vector<std::pair<std::string, std::string>>& hosts, int deadline_ms) {
  engined::ExpertSourceOptions xo;
  xo.insecure_remote = true;
  for (const auto& [n, a] : hosts) {
    engined::RemoteHost h;
    h.name = n;
    h.address = a;
    h.insecure = true;
    xo.remote_hosts.push_back(h);
  }
  xo.remote_deadline_ms = deadline_ms;
  return xo;
}

std::vector<float> score_with(const engined::ExpertSourceOptions& xo,
                              const std::vector<int32_t>& ids, Status* status,
                              ExpertSourceStats* stats) {
  auto m = engined::Model::load(testing::tiny_model_dir(), {}, engined::EngineOptions{});
  if (!m.ok()) {
    *status = m.status();
    return {};
  }
  auto experts = engined::make_expert_source(xo, **m);
  if (!experts.ok()) {
    *status = experts.status();
    return {};
  }
  auto seq = (*m)->new_sequence();
  std::vector<float> logits;
  *status = (*m)->forward(**experts, *seq, ids, static_cast<int64_t>(ids.size()), &logits);
  if (stats) *stats = (*experts)->stats();
  return logits;
}

std::vector<int32_t> greedy_with(const engined::ExpertSourceOptions& xo,
                                 const std::vector<int32_t>& ids, int n, Status* status,
                                 const std::function<void(int)>& after_step,
                                 ExpertSourceStats* stats) {
  std::vector<int32_t> out;
  auto m = engined::Model::load(testing::tiny_model_dir(), {}, engined::EngineOptions{});
  if (!m.ok()) {
    *status = m.status();
    return out;
  }
  auto experts = engined::make_expert_source(xo, **m);
  if (!experts.ok()) {
    *status = experts.status();
    return out;
  }
  const int64_t V = (*m)->config().vocab_size;
  auto seq = (*m)->new_sequence();
  std::vector<float> logits;
  *status = (*m)->forward(**experts, *seq, ids, static_cast<int64_t>(ids.size()), &logits);
  for (int i = 0; i < n && status->ok(); ++i) {
    const float* last = logits.data() + (logits.size() / V - 1) * V;
    const int32_t next = static_cast<int32_t>(std::max_element(last, last + V) - last);
    out.push_back(next);
    if (after_step) after_step(i);
    *status = (*m)->forward(**experts, *seq, {next}, 1, &logits);
  }
  if (stats) *stats = (*experts)->stats();
  return out;
}

}  // namespace k3::expertd_test
