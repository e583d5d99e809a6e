#include "engined/serving/pass_pacer.h"

#include <algorithm>

namespace k3::engined {

double PassPacer::part_budget(std::optional<double> beside) {
  if (fixed_ > 0) return fixed_;
  if (!beside) return kAloneSeconds;
  mean_ = mean_ > 0 ? 0.75 * mean_ + 0.25 * *beside : *beside;
  return std::clamp(kBesideFactor * std::min(*beside, mean_), kMinSeconds, kMaxSeconds);
}

int64_t PassProgress::tokens_read(const ChunkPass& pass) {
  const int64_t T = pass.tokens();
  if (pass.done()) return T;
  return std::min<int64_t>(T - 1, static_cast<int64_t>(pass.fraction() * static_cast<double>(T)));
}

int64_t PassProgress::add_part(int64_t now, double seconds, PrefillRate* rate) {
  unrated_seconds_ += seconds;
  if (now <= done_) return 0;
  const int64_t moved = now - done_;
  rate->add(moved, unrated_seconds_);
  unrated_seconds_ = 0;
  done_ = now;
  return moved;
}

}  // namespace k3::engined
