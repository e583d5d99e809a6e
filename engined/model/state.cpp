#include "engined/model/state.h"

namespace k3::engined {

SequenceState::SequenceState(const checkpoint::ModelConfig& c) {
  kda.resize(static_cast<size_t>(c.num_hidden_layers));
  mla.resize(static_cast<size_t>(c.num_hidden_layers));
  const size_t hdd = static_cast<size_t>(c.kda_num_heads * c.kda_head_dim * c.kda_head_dim);
  const size_t win = static_cast<size_t>((c.short_conv_kernel_size - 1) * c.kda_proj());
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.is_kda(l)) continue;
    kda[l].s.assign(hdd, 0.0f);
    kda[l].conv_q.assign(win, 0.0f);
    kda[l].conv_k.assign(win, 0.0f);
    kda[l].conv_v.assign(win, 0.0f);
  }
}

size_t SequenceState::bytes() const {
  size_t n = 0;
  for (const auto& k : kda)
    n += (k.s.size() + k.conv_q.size() + k.conv_k.size() + k.conv_v.size()) * 4;
  for (const auto& m : mla) n += (m.ckv.size() + m.k_r.size()) * 4;
  return n;
}

}  // namespace k3::engined
