#include "engined/sampler.h"

#include <algorithm>
#include <cmath>

namespace k3::engine {

int32_t Sampler::sample(const float* logits, int64_t vocab) {
  if (p_.temperature <= 0.0f) {
    int32_t best = 0;
    for (int64_t i = 1; i < vocab; ++i)
      if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
    return best;
  }
  cand_.resize(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) cand_[i] = {logits[i], static_cast<int32_t>(i)};
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  size_t n = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    n = static_cast<size_t>(p_.top_k);
    std::partial_sort(cand_.begin(), cand_.begin() + n, cand_.end(), by_logit);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  // Softmax over the candidates at the temperature (in double).
  const double mx = cand_[0].first;
  std::vector<double> prob(n);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    prob[i] = std::exp((cand_[i].first - mx) / p_.temperature);
    sum += prob[i];
  }
  if (p_.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += prob[i] / sum;
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
    sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += prob[i];
  }
  std::uniform_real_distribution<double> uni(0.0, sum);
  double r = uni(rng_);
  for (size_t i = 0; i < n; ++i) {
    r -= prob[i];
    if (r <= 0.0) return cand_[i].second;
  }
  return cand_[n - 1].second;
}

}  // namespace k3::engine
