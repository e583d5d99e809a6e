// The model's scalar activation functions (K3_MODEL.md notation), shared by
// the dense stack (engined/model) and the routed experts
// (shared/experts/expert_compute.h) so both compute the same bits. Plain
// scalar code the compiler vectorizes.
#pragma once

#include <cmath>

namespace k3::kernels {

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
inline float silu(float x) {
  return x * sigmoid(x);
}
// SiTU(g, u) = b1 tanh(g/b1) sigma(g) * b2 tanh(u/b2).
inline float situ(float g, float u, float b1, float b2) {
  return b1 * std::tanh(g / b1) * sigmoid(g) * (b2 * std::tanh(u / b2));
}

}  // namespace k3::kernels
