#include "shared/base/hash.h"

#include <openssl/evp.h>

#include <cstdio>
#include <stdexcept>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace k3::base {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Hash128 from_xxh(XXH128_hash_t h) {
  return Hash128{h.high64, h.low64};
}

}  // namespace

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Hash128::hex() const {
  return hex64(hi) + hex64(lo);
}

std::optional<Hash128> Hash128::from_hex(std::string_view s) {
  if (s.size() != 32) return std::nullopt;
  Hash128 h;
  for (size_t i = 0; i < 32; ++i) {
    const int v = hex_value(s[i]);
    if (v < 0) return std::nullopt;
    uint64_t& half = i < 16 ? h.hi : h.lo;
    half = (half << 4) | static_cast<uint64_t>(v);
  }
  return h;
}

Hash128 xxh3_128(const void* data, size_t n) {
  return from_xxh(XXH3_128bits(data, n));
}

struct Xxh3Stream::State {
  XXH3_state_t s;
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) {
  XXH3_128bits_reset(&state_->s);
}
Xxh3Stream::~Xxh3Stream() = default;
Xxh3Stream::Xxh3Stream(Xxh3Stream&&) noexcept = default;
Xxh3Stream& Xxh3Stream::operator=(Xxh3Stream&&) noexcept = default;

void Xxh3Stream::update(const void* data, size_t n) {
  XXH3_128bits_update(&state_->s, data, n);
}

Hash128 Xxh3Stream::digest() const {
  return from_xxh(XXH3_128bits_digest(&state_->s));
}

struct Sha256Stream::State {
  EVP_MD_CTX* ctx = nullptr;
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256Stream::Sha256Stream() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  // Allocation failure of a few hundred bytes: nothing sensible to return.
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1)
    throw std::bad_alloc();
}
Sha256Stream::~Sha256Stream() = default;
Sha256Stream::Sha256Stream(Sha256Stream&&) noexcept = default;
Sha256Stream& Sha256Stream::operator=(Sha256Stream&&) noexcept = default;

void Sha256Stream::update(const void* data, size_t n) {
  EVP_DigestUpdate(state_->ctx, data, n);
}

std::string Sha256Stream::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(state_->ctx, md, &len);
  std::string out;
  static const char* kHex = "0123456789abcdef";
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

}  // namespace k3::base
