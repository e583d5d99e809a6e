// Test helper: attaches to an expertd segment, asks for the experts named on
// the command line and blocks inside the first on_ready until killed: the
// first lease is held, and expertd pins the others as their reads complete.
//   lease_holder SEGMENT FINGERPRINT EXPERT_BYTES NUM_EXPERTS LAYER E1 [E2 ...]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "engined/shm_expert_source.h"

int main(int argc, char** argv) {
  if (argc < 7) return 2;
  k3::engine::ShmSourceOptions o;
  o.segments = {argv[1]};
  o.fingerprint = std::strtoull(argv[2], nullptr, 10);
  o.expert_bytes = std::strtoull(argv[3], nullptr, 10);
  o.num_experts = std::strtoll(argv[4], nullptr, 10);
  const int64_t layer = std::strtoll(argv[5], nullptr, 10);
  std::vector<int64_t> ids;
  for (int i = 6; i < argc; ++i) ids.push_back(std::strtoll(argv[i], nullptr, 10));
  auto src = k3::engine::ShmExpertSource::create(o);
  if (!src.ok()) {
    std::fprintf(stderr, "%s\n", k3::msg(src.status()).c_str());
    return 1;
  }
  auto st = (*src)->fetch(layer, ids, [&](size_t, const uint8_t*) -> k3::Status {
    std::printf("holding\n");
    std::fflush(stdout);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  });
  return st.ok() ? 0 : 1;
}
