// Counter-based random numbers: value i of a stream is a pure function of
// (stream key, i), so any range of a tensor can be generated independently,
// in parallel and in any order, with identical results.
#pragma once

#include <cstdint>
#include <string_view>

namespace k3::tools {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a of a name mixed with the seed: the key of a tensor's stream.
inline uint64_t stream_key(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return splitmix64(h ^ splitmix64(seed));
}

inline uint64_t random_u64(uint64_t key, uint64_t i) {
  return splitmix64(key ^ splitmix64(i));
}

// Uniform in [0, 1).
inline double random_uniform(uint64_t key, uint64_t i) {
  return static_cast<double>(random_u64(key, i) >> 11) * 0x1.0p-53;
}

// Approximately standard normal (Irwin-Hall of four 16-bit uniforms, scaled to
// unit variance): cheap, bounded at +-3.46, plenty for synthetic weights.
inline float random_normal(uint64_t key, uint64_t i) {
  uint64_t r = random_u64(key, i);
  uint32_t s = static_cast<uint32_t>(r & 0xffff) + static_cast<uint32_t>((r >> 16) & 0xffff) +
               static_cast<uint32_t>((r >> 32) & 0xffff) + static_cast<uint32_t>(r >> 48);
  return (static_cast<float>(s) * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

}  // namespace k3::tools
