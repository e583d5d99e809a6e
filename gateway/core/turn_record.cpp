#include "gateway/core/turn_record.h"

#include <algorithm>

namespace k3::gateway {

uint64_t TurnRecord::hash(const int32_t* ids, size_t n) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the ids' bytes
  for (size_t i = 0; i < n; ++i) {
    uint32_t v = static_cast<uint32_t>(ids[i]);
    for (int b = 0; b < 4; ++b) {
      h ^= v & 0xff;
      h *= 1099511628211ull;
      v >>= 8;
    }
  }
  return h ^ n;
}

void TurnRecord::remember(std::vector<int32_t> rendered, std::vector<int32_t> ran,
                          size_t prompt_len) {
  if (rendered.empty() || capacity_ == 0) return;
  const uint64_t h = hash(rendered.data(), rendered.size());
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = entries_.find(h); it != entries_.end()) {
    lru_.erase(it->second.second);
    entries_.erase(it);
  }
  lru_.push_front(h);
  entries_.emplace(
      h, std::make_pair(Entry{std::move(rendered), std::move(ran), prompt_len}, lru_.begin()));
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
}

std::optional<TurnRecord::Hit> TurnRecord::find(const std::vector<int32_t>& prompt,
                                                const std::vector<uint32_t>& starts) const {
  std::vector<uint32_t> by_length(starts);
  std::sort(by_length.rbegin(), by_length.rend());
  std::lock_guard<std::mutex> lk(mu_);
  if (entries_.empty()) return std::nullopt;
  for (uint32_t p : by_length) {
    if (p == 0 || p > prompt.size()) continue;
    auto it = entries_.find(hash(prompt.data(), p));
    if (it == entries_.end()) continue;
    const Entry& e = it->second.first;
    if (e.rendered.size() != p || !std::equal(e.rendered.begin(), e.rendered.end(), prompt.begin()))
      continue;  // a hash collision
    lru_.splice(lru_.begin(), lru_, it->second.second);
    return Hit{p, e.prompt_len, e.ran, e.ran.size()};
  }
  return std::nullopt;
}

}  // namespace k3::gateway
