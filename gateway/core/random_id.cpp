#include "gateway/core/random_id.h"

#include <random>

#include "shared/status.h"

namespace k3::gateway {
namespace {

std::string random_alnum(size_t n) {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string s(n, ' ');
  for (auto& c : s) c = kChars[rng() % (sizeof kChars - 1)];
  return s;
}

}  // namespace

std::string random_id(std::string_view prefix) {
  return cat(prefix, random_alnum(24));
}

}  // namespace k3::gateway
