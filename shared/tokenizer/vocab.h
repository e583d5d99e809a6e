// The rank table of a byte-level BPE vocabulary: token bytes <-> rank, with a
// hash lookup keyed by the bytes themselves (tiktoken's encoder map).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace k3::tokenizer {

// A token id: a rank (0 .. num_ranks-1) or a special token above the ranks.
using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// Ranks 0..n-1 and their byte strings. Immutable after create(); thread-safe.
//
// Lookups are the inner loop of BPE, so find() is inline and avoids memory:
// 1- and 2-byte keys index a direct table; other keys probe an open-addressing
// table whose slots hold a token's first 8 bytes (in a canonical per-length
// form), so a key of up to 8 bytes is confirmed without touching the byte
// arena.
class RankTable {
 public:
  RankTable() = default;

  // `tokens[r]` is the byte string of rank r. Refuses duplicate byte strings
  // (naming both ranks), empty tokens, more than 2^31-2 ranks, and a table that
  // lacks one of the 256 single bytes (some input could not be encoded).
  static StatusOr<RankTable> create(const std::vector<std::string>& tokens);

  size_t size() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }

  // The bytes of rank `r` (0 <= r < size()).
  std::string_view bytes(TokenId r) const {
    return std::string_view(arena_.data() + offsets_[r], offsets_[r + 1] - offsets_[r]);
  }

  // The rank whose bytes are `key`, or kNoToken.
  TokenId find(std::string_view key) const {
    const size_t n = key.size();
    const auto* p = reinterpret_cast<const unsigned char*>(key.data());
    if (n <= 2) {
      if (n == 0) return kNoToken;
      return short_ranks_[n == 1 ? p[0] : 256 + (size_t{p[0]} << 8 | p[1])];
    }
    const uint64_t word = head_word(key.data(), n);
    const uint64_t h = hash_of(key.data(), n, word);
    const uint32_t check = check_of(h, n);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.rank == kNoToken) return kNoToken;
      if (s.check == check && s.word == word &&
          (n <= 8 || (bytes(s.rank).size() == n &&
                      std::memcmp(arena_.data() + offsets_[s.rank], p, n) == 0))) {
        return s.rank;
      }
    }
  }

  // A fast 64-bit hash of a byte string (also used by the piece cache).
  static uint64_t hash_bytes(const char* p, size_t n) { return hash_of(p, n, head_word(p, n)); }

 private:
  struct Slot {
    uint64_t word = 0;        // head_word() of the token
    TokenId rank = kNoToken;  // kNoToken: empty slot
    uint32_t check = 0;       // check_of(): hash bits and length
  };

  // 64x64 -> 128 multiply, folded (wyhash's "mum").
  static uint64_t mum(uint64_t a, uint64_t b) {
    const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
    return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
  }
  static uint32_t load32(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  static uint64_t load64(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  // The first up-to-8 bytes as one word, injective among keys of one length
  // (overlapping loads: never reads outside the key).
  static uint64_t head_word(const char* p, size_t n) {
    if (n >= 8) return load64(p);
    if (n >= 4) return (uint64_t{load32(p)} << 32) | load32(p + n - 4);
    if (n == 0) return 0;
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    return (uint64_t{u[0]} << 16) | (uint64_t{u[n >> 1]} << 8) | u[n - 1];
  }
  static uint64_t hash_of(const char* p, size_t n, uint64_t word) {
    constexpr uint64_t k0 = 0xA0761D6478BD642Full, k1 = 0xE7037ED1A0B428DBull,
                       k2 = 0x8EBC6AF09C88C6E3ull;
    const uint64_t seed = n * k2;
    if (n <= 8) return mum(word ^ k0, seed ^ k1);
    if (n <= 16) return mum(word ^ k0, load64(p + n - 8) ^ seed ^ k1);
    uint64_t h = seed;
    size_t i = 0;
    for (; i + 16 < n; i += 16) h = mum(load64(p + i) ^ k0, load64(p + i + 8) ^ h ^ k1);
    return mum(load64(p + n - 16) ^ k0 ^ h, load64(p + n - 8) ^ k1);
  }
  static uint32_t check_of(uint64_t h, size_t n) {
    return static_cast<uint32_t>(h >> 40) << 8 | static_cast<uint32_t>(n < 255 ? n : 255);
  }

  std::string arena_;                 // all token bytes, rank order
  std::vector<uint32_t> offsets_;     // {size()+1}: rank r is arena_[offsets_[r], offsets_[r+1])
  std::vector<TokenId> short_ranks_;  // {256 + 65536}: 1-byte keys, then 2-byte keys
  std::vector<Slot> slots_;           // keys of 3+ bytes, open addressing
  size_t mask_ = 0;
};

}  // namespace k3::tokenizer
