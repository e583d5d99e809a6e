// Every tensor name of the K3 text model, built in one place, with the shape
// and storage class each must have (K3_MODEL.md, "Tensor names").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/checkpoint/model_config.h"

namespace k3::checkpoint {

// How a tensor is stored.
enum class TensorClass {
  kDense,         // BF16, F16 or F32
  kExpertPacked,  // U8, MXFP4 nibbles [O, I/2]
  kExpertScale,   // U8, ue8m0 exponents [O, I/32]
  kALog,          // dense, 1-D, at least num_heads long (zero-padded in the checkpoint)
};

// What a tensor is to the model: the engine binds its weights by (role, layer)
// and never spells a name (engined/model/weights.cpp).
enum class TensorRole : uint8_t {
  kEmbed,
  kFinalNorm,
  kOutResNorm,
  kOutResProj,
  kLmHead,  // whole model (layer -1)
  kInNorm,
  kPostNorm,
  kAttnResNorm,
  kMlpResNorm,
  kAttnResProj,
  kMlpResProj,
  kKdaQ,
  kKdaK,
  kKdaV,
  kKdaG,
  kKdaO,
  kKdaQConv,
  kKdaKConv,
  kKdaVConv,
  kKdaFA,
  kKdaFB,
  kKdaB,
  kKdaDtBias,
  kKdaALog,
  kKdaONorm,
  kMlaQA,
  kMlaQANorm,
  kMlaQB,
  kMlaKvA,
  kMlaKvANorm,
  kMlaKvB,
  kMlaG,
  kMlaO,
  kFfnGate,
  kFfnUp,
  kFfnDown,
  kRouter,
  kRouterBias,
  kLatDown,
  kLatUp,
  kLatNorm,
  kSharedGate,
  kSharedUp,
  kSharedDown,
  kExpert,  // the six tensors of a routed expert (bound by ExpertIndex)
};

// Which bits setting quantizes a big matrix (engine QuantConfig, k3ctl
// repack); kNone: small or sensitive, kept as stored and widened to f32.
enum class QuantGroup : uint8_t { kNone, kDense, kMla, kHead };

struct ExpectedTensor {
  std::string name;  // without the "language_model." prefix
  std::vector<int64_t> shape;
  TensorClass cls = TensorClass::kDense;
  TensorRole role = TensorRole::kExpert;
  int64_t layer = -1;  // -1: not a layer's tensor
  QuantGroup quant = QuantGroup::kNone;
  // Absent is an error (every tensor of the text model is required today;
  // which ones exist is decided by the config: tied head, shared experts).
  bool required = true;
};

// Names (without prefix). `layer` is 0-based.
namespace tensor_names {
std::string layer(int64_t layer, const std::string& rest);  // model.layers.L.<rest>
std::string attn(int64_t layer, const std::string& rest);   // ...self_attn.<rest>
std::string moe(int64_t layer, const std::string& rest);    // ...block_sparse_moe.<rest>
// experts.E.w{1,2,3}.weight_{packed,scale}; `w` in {1,2,3}, `packed` or scale.
std::string expert(int64_t layer, int64_t expert, int w, bool packed);
}  // namespace tensor_names

// The six tensors of one routed expert, in the order the checkpoint stores
// them back to back: w1.packed, w1.scale, w2.packed, w2.scale, w3.packed, w3.scale.
std::vector<ExpectedTensor> expert_tensors(const ModelConfig& c, int64_t layer, int64_t expert);

// Every tensor of the text model except the routed experts.
std::vector<ExpectedTensor> dense_tensors(const ModelConfig& c);

// Every tensor: dense_tensors() then, per MoE layer and expert, expert_tensors().
std::vector<ExpectedTensor> all_tensors(const ModelConfig& c);

}  // namespace k3::checkpoint
