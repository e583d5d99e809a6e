// Test helper: attaches to an expertd segment, asks for the experts named on
// the command line and blocks on the first delivered bytes until killed: the
// first lease is held, and expertd pins the others as their reads complete.
//   lease_holder SEGMENT MODEL_DIR LAYER E1 [E2 ...]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "shared/checkpoint/checkpoint.h"
#include "shared/experts/shm_source.h"

int main(int argc, char** argv) {
  if (argc < 5) return 2;
  auto config = k3::checkpoint::load_model_config(argv[2]);
  auto ck = config.ok() ? k3::checkpoint::Checkpoint::open(argv[2]) : config.status();
  if (!ck.ok()) {
    std::fprintf(stderr, "%s\n", k3::msg(ck.status()).c_str());
    return 1;
  }
  k3::experts::ShmSourceOptions o;
  o.segment = argv[1];
  o.fingerprint = (*ck)->fingerprint();
  const int64_t layer = std::strtoll(argv[3], nullptr, 10);
  std::vector<int64_t> ids;
  for (int i = 4; i < argc; ++i) ids.push_back(std::strtoll(argv[i], nullptr, 10));
  auto src = k3::experts::ShmExpertSource::create(o, k3::experts::ExpertShape::of(*config));
  if (!src.ok()) {
    std::fprintf(stderr, "%s\n", k3::msg(src.status()).c_str());
    return 1;
  }
  auto st = k3::experts::fetch_bytes(**src, layer, ids, [&](size_t, const uint8_t*) -> k3::Status {
    std::printf("holding\n");
    std::fflush(stdout);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  });
  return st.ok() ? 0 : 1;
}
