#include "engined/serving/prefill_rate.h"

#include <algorithm>
#include <cmath>

namespace k3::engined {

void PrefillRate::add(int64_t tokens, double seconds) {
  if (tokens <= 0 || !std::isfinite(seconds) || seconds <= 0) return;
  tokens_ = tokens_ * kDecay + static_cast<double>(tokens);
  seconds_ = seconds_ * kDecay + seconds;
}

double PrefillRate::tokens_per_second() const {
  return seconds_ > 0 ? tokens_ / seconds_ : 0.0;
}

double PrefillRate::eta_seconds(int64_t remaining, int sharing) const {
  if (remaining <= 0) return 0.0;
  const double rate = tokens_per_second();
  if (rate <= 0) return -1.0;
  return static_cast<double>(remaining) * std::max(sharing, 1) / rate;
}

}  // namespace k3::engined
