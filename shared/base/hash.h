// Content hashes of bytes we did not write: XXH3-128 for the integrity
// manifest (fast enough to run on every expert read) and SHA-256 for the
// whole-file lists a snapshot publishes (`sha256sum` format).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "shared/status.h"

namespace k3::base {

// A 128-bit hash, printed as 32 lowercase hex digits, high half first (the
// order of XXH3's canonical form).
struct Hash128 {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const Hash128&) const = default;
  std::string hex() const;
  // nullopt unless `s` is exactly 32 hex digits.
  static std::optional<Hash128> from_hex(std::string_view s);
};

// 16 lowercase hex digits, zero-padded: how a 64-bit fingerprint or hash is
// shown everywhere (Describe, manifests, logs, ETags).
std::string hex64(uint64_t v);

// XXH3-128 of one buffer.
Hash128 xxh3_128(const void* data, size_t n);

// Streaming XXH3-128: the same value as xxh3_128() over the concatenation of
// every update(). Move-only; not thread-safe.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(Xxh3Stream&&) noexcept;
  Xxh3Stream& operator=(Xxh3Stream&&) noexcept;
  void update(const void* data, size_t n);
  Hash128 digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Streaming SHA-256 (OpenSSL's EVP). Move-only; not thread-safe.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(Sha256Stream&&) noexcept;
  Sha256Stream& operator=(Sha256Stream&&) noexcept;
  void update(const void* data, size_t n);
  // 64 lowercase hex digits. Ends the stream.
  std::string hex_digest();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace k3::base
