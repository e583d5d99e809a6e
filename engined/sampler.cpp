#include "engined/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace k3::engined {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

k3serve::v1::SamplingParams to_wire(const SamplingParams& p) {
  k3serve::v1::SamplingParams w;
  w.set_temperature(p.temperature);
  w.set_top_p(p.top_p);
  w.set_top_k(p.top_k);
  w.set_seed(p.seed);
  w.set_min_p(p.min_p);
  w.set_presence_penalty(p.presence_penalty);
  w.set_frequency_penalty(p.frequency_penalty);
  w.set_repetition_penalty(p.repetition_penalty);
  for (const auto& [id, bias] : p.logit_bias) (*w.mutable_logit_bias())[id] = bias;
  return w;
}

TokenLogprobs token_logprobs(const float* logits, int64_t vocab, int32_t chosen, int top_n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < vocab; ++i) m = std::max(m, static_cast<double>(logits[i]));
  double s = 0;
  for (int64_t i = 0; i < vocab; ++i) s += std::exp(static_cast<double>(logits[i]) - m);
  const double lse = m + std::log(s);
  TokenLogprobs out;
  out.chosen = static_cast<float>(logits[chosen] - lse);
  if (top_n > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    const size_t n = std::min<size_t>(static_cast<size_t>(top_n), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                      [&](int32_t a, int32_t b) {
                        return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
                      });
    for (size_t i = 0; i < n; ++i)
      out.top.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - lse));
  }
  return out;
}

void Sampler::set_context(const std::vector<int32_t>& prompt, std::unordered_set<int32_t> exempt) {
  exempt_ = std::move(exempt);
  for (int32_t id : prompt)
    if (!exempt_.count(id)) seen_.insert(id);
}

void Sampler::process(const float* logits, int64_t vocab, const uint8_t* mask,
                      std::vector<float>* out) const {
  out->assign(logits, logits + vocab);
  std::vector<float>& x = *out;
  for (const auto& [id, b] : p_.logit_bias)
    if (id >= 0 && id < vocab) x[static_cast<size_t>(id)] = b <= -100.0f ? kNegInf : x[id] + b;
  if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f)
    for (const auto& [id, n] : generated_)
      if (id >= 0 && id < vocab)
        x[static_cast<size_t>(id)] -=
            p_.presence_penalty + p_.frequency_penalty * static_cast<float>(n);
  if (p_.repetition_penalty != 1.0f)
    for (int32_t id : seen_) {
      if (id < 0 || id >= vocab) continue;
      float& v = x[static_cast<size_t>(id)];
      v = v > 0 ? v / p_.repetition_penalty : v * p_.repetition_penalty;
    }
  if (mask != nullptr)
    for (int64_t i = 0; i < vocab; ++i)
      if (!mask[i]) x[static_cast<size_t>(i)] = kNegInf;
}

int32_t Sampler::sample(const float* logits, int64_t vocab, const uint8_t* mask) {
  const bool plain = p_.logit_bias.empty() && p_.presence_penalty == 0.0f &&
                     p_.frequency_penalty == 0.0f && p_.repetition_penalty == 1.0f &&
                     mask == nullptr;
  const float* x = logits;
  if (!plain) {
    process(logits, vocab, mask, &work_);
    x = work_.data();
  }
  int32_t pick = 0;
  if (p_.temperature <= 0.0f || p_.top_k == 1) {
    for (int64_t i = 1; i < vocab; ++i)
      if (x[i] > x[pick]) pick = static_cast<int32_t>(i);
  } else {
    cand_.clear();
    for (int64_t i = 0; i < vocab; ++i)
      if (x[i] != kNegInf) cand_.emplace_back(x[i], static_cast<int32_t>(i));
    if (cand_.empty()) {  // everything banned: fall back to the model's argmax
      for (int64_t i = 1; i < vocab; ++i)
        if (logits[i] > logits[pick]) pick = static_cast<int32_t>(i);
    } else {
      auto by_logit = [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      };
      size_t n = cand_.size();
      if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
        n = static_cast<size_t>(p_.top_k);
        std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(n),
                          cand_.end(), by_logit);
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
      }
      if (p_.min_p > 0.0f) {  // prob[0] is the largest
        size_t keep = 1;
        while (keep < n && prob[keep] >= p_.min_p * prob[0]) ++keep;
        n = keep;
      }
      sum = 0.0;
      for (size_t i = 0; i < n; ++i) sum += prob[i];
      std::uniform_real_distribution<double> uni(0.0, sum);
      double r = uni(rng_);
      pick = cand_[n - 1].second;
      for (size_t i = 0; i < n; ++i) {
        r -= prob[i];
        if (r <= 0.0) {
          pick = cand_[i].second;
          break;
        }
      }
    }
  }
  ++generated_[pick];
  if (!exempt_.count(pick)) seen_.insert(pick);
  return pick;
}

}  // namespace k3::engined
