// libFuzzer target: engined's checkpoint files (--checkpoint-dir): a real
// store on the tiny model's config saves a real state, then its file is
// replaced by the input (first byte even) or is the genuine file with the
// input's (offset, xor) edits and an optional truncation (odd), and restored.
// A restore either drops the file (none restored) or gives a state of exactly
// the model's geometry; never a crash or an out-of-bounds read.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engined/serving/checkpoint_store.h"
#include "shared/base/log.h"

namespace fs = std::filesystem;
using namespace k3;
using namespace k3::engined;

namespace {

struct World {
  checkpoint::ModelConfig config;
  std::string dir;
  World() {
    std::ifstream f(K3_FUZZ_MODEL_CONFIG);
    std::stringstream ss;
    ss << f.rdbuf();
    auto c = checkpoint::parse_model_config(ss.str());
    if (!c.ok()) __builtin_trap();
    config = *c;
    dir = "/tmp/k3fuzz-ckpt-" + std::to_string(::getpid());
    base::set_log_level("error");  // a dropped file is logged as a warning
  }
  ~World() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

World& world() {
  static World w;
  return w;
}

// The state after `n` tokens with the geometry the store expects.
SequenceState state_of(const checkpoint::ModelConfig& c, int64_t n) {
  SequenceState s(c);
  s.position = n;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.is_kda(l)) continue;
    s.mla[l].ckv.assign(static_cast<size_t>(n * c.kv_lora_rank), 0.5f);
    s.mla[l].k_r.assign(static_cast<size_t>(n * c.qk_rope_head_dim), -0.25f);
  }
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& w = world();
  const checkpoint::ModelConfig& c = w.config;
  CheckpointOptions o;
  o.dir = w.dir;  // files only: a restore reads the file back
  o.disk_budget_bytes = 1ull << 30;
  {
    std::error_code ec;
    fs::remove_all(w.dir, ec);  // the last input's file is not indexed again
  }
  auto store = CheckpointStore::open(o, c, /*fingerprint=*/0x6b33, /*dense_bits=*/4);
  if (!store.ok()) __builtin_trap();
  const std::vector<int32_t> tokens = {11, 12, 13};
  std::vector<float> logits(static_cast<size_t>(c.vocab_size), 1.0f);
  if (!(*store)->save(tokens, 3, state_of(c, 3), logits).ok() || !(*store)->has(tokens, 3))
    __builtin_trap();
  (*store)->wait_writes();
  std::string file;
  for (const auto& e : fs::directory_iterator(w.dir))
    if (e.path().extension() == ".k3snap") file = e.path();
  if (file.empty()) __builtin_trap();

  // K3_FUZZ_WRITE_SEED=FILE: write the genuine file as a whole-file seed
  // (how corpus/checkpoint/genuine was made).
  if (const char* seed = std::getenv("K3_FUZZ_WRITE_SEED")) {
    std::ifstream in(file, std::ios::binary);
    std::ofstream out(seed, std::ios::binary | std::ios::trunc);
    out.put('\0');
    out << in.rdbuf();
  }
  std::string bytes;
  if (data[0] % 2 == 0) {
    bytes.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  } else {
    std::ifstream f(file, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    bytes = ss.str();
    size_t i = 1;
    if (i + 4 <= size && data[i] == 0xFF) {  // truncate to the next 3 bytes' length
      bytes.resize(std::min<size_t>(
          bytes.size(), (size_t{data[i + 1]} << 16) | (size_t{data[i + 2]} << 8) | data[i + 3]));
      i += 4;
    }
    for (; i + 5 <= size; i += 5) {  // (u32 offset, xor byte) edits
      const uint32_t off = uint32_t{data[i]} | uint32_t{data[i + 1]} << 8 |
                           uint32_t{data[i + 2]} << 16 | uint32_t{data[i + 3]} << 24;
      if (!bytes.empty()) bytes[off % bytes.size()] ^= static_cast<char>(data[i + 4]);
    }
  }
  {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const std::vector<int32_t> prompt = {11, 12, 13, 14};
  RestoredState r = (*store)->restore_deepest(prompt, 0);
  if (r.tokens != 0) {
    if (r.tokens != 3 || r.state == nullptr || r.state->position != 3) __builtin_trap();
    if (r.logits.size() != static_cast<size_t>(c.vocab_size)) __builtin_trap();
    const SequenceState want = state_of(c, 3);
    for (size_t l = 0; l < want.kda.size(); ++l)
      if (r.state->kda[l].s.size() != want.kda[l].s.size() ||
          r.state->mla[l].ckv.size() != want.mla[l].ckv.size() ||
          r.state->mla[l].k_r.size() != want.mla[l].k_r.size())
        __builtin_trap();
  } else if ((*store)->size() != 0) {
    __builtin_trap();  // a file that cannot be read back is dropped
  }
  return 0;
}
