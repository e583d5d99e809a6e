// Helpers of the remote expertd suites: an expertd with --remote-listen (its
// bound address read back from Describe), scoring and greedy decoding
// through remote hosts, and the hosts' Stats over their control socket.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engined/experts/source_factory.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/experts/expert_source.h"
#include "shared/status.h"
#include "tests/expertd/expertd_harness.h"
#include "tests/test_util.h"

namespace k3::expertd_test {

// An expertd serving RemoteExpertService on 127.0.0.1 (port 0 unless given)
// plus its local segment. `env` is set in its environment (e.g.
// "K3_KERNELS=scalar").
struct RemoteExpertd {
  std::unique_ptr<Expertd> d;
  std::string address;  // HOST:PORT as bound
  RemoteExpertd(const testing::TempDir& tmp, const std::string& tag,
                std::vector<std::string> remote_flags, const std::string& model,
                const std::string& env = "", const std::string& listen = "127.0.0.1:0",
                const std::vector<std::string>& wrapper = {});
  // Waits for the segment, the control socket and the remote listener.
  bool wait_ready(double seconds = 30);
  k3serve::v1::StatsResponse stats() const { return d->stats(); }
  k3serve::v1::DescribeResponse describe() const;
  std::string log() const { return testing::read_file(d->log); }
};

// The remote-host part of ExpertSourceOptions: plaintext hosts NAME=ADDRESS.
engined::ExpertSourceOptions insecure_hosts(
    const std::vector<std::pair<std::string, std::string>>& hosts, int deadline_ms = 3000);

// Every position's logits of `ids` on the tiny model, experts from `xo`.
std::vector<float> score_with(const engined::ExpertSourceOptions& xo,
                              const std::vector<int32_t>& ids, Status* status,
                              experts::ExpertSourceStats* stats = nullptr);

// Greedy decoding of `n` tokens after `ids` on the tiny model, one token per
// step; after_step(i) runs after step i (to kill a host mid-generation).
std::vector<int32_t> greedy_with(const engined::ExpertSourceOptions& xo,
                                 const std::vector<int32_t>& ids, int n, Status* status,
                                 const std::function<void(int)>& after_step = {},
                                 experts::ExpertSourceStats* stats = nullptr);

}  // namespace k3::expertd_test
