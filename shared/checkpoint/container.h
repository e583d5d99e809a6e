// The repacked container (`k3ctl repack`, shared/checkpoint/repack.h) and the
// one place a tensor of the model table is found in a checkpoint, whatever
// form it is stored in.
//
// A container is an ordinary safetensors checkpoint directory (config.json
// byte-identical to the source's, model.safetensors.index.json, shards named
// model-NNNNN-of-MMMMM.safetensors) plus k3container.json naming the bits it
// was prepared at. Shard 1 holds the dense part; shards 2.. hold the routed
// experts of one MoE layer each, byte-identical to the source, in expert order,
// one contiguous span per expert. A big matrix of quantization group G (model
// tensor `X`, shape [rows, cols], groups = (cols + 63) / 64) is stored at the
// bits chosen for G as:
//   32: X            F32 [rows, cols]
//    8: X.q8         I8  [rows, cols]        (int8 per row, kernels/dense.h)
//       X.q8_scale   F32 [rows]
//    4: X.q4         U8  [rows, groups * 32] (int4 per 64-column group, packed:
//                                             LOW nibble = even column, q + 8)
//       X.q4_scale   F32 [rows, groups]
// With tied embeddings the head is the embedding quantized at the head bits
// (model.embed_tokens.weight.q8 / .q4 beside the pass-through embedding).
// Every other tensor (norms, router and its bias, conv taps, dt_bias, A_log,
// f_a / f_b, b_proj, the embedding) passes through in its stored dtype.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/status.h"

namespace k3::checkpoint {

inline constexpr const char* kContainerFile = "k3container.json";

// What k3container.json records.
struct ContainerInfo {
  int dense_bits = 4, mla_bits = 8, head_bits = 8;
  bool dense_only = false;   // no routed experts (a compute node's part)
  int64_t shards = 0;        // output shards of the complete container
  uint64_t fingerprint = 0;  // Checkpoint::fingerprint() of the source

  int bits_for(QuantGroup g) const;
  std::string to_json() const;
  bool operator==(const ContainerInfo&) const = default;
};

// nullopt when `dir` holds no k3container.json; an error naming the file when
// it holds a malformed one.
StatusOr<std::optional<ContainerInfo>> read_container_info(const std::string& dir);

// Names of the quantized forms of `name` (model or full name).
std::string quantized_name(const std::string& name, int bits);
std::string quantized_scale_name(const std::string& name, int bits);

// How one tensor of the table is stored.
struct StoredTensor {
  enum class Form { kFloat, kQ8, kQ4, kExpert };
  Form form = Form::kFloat;
  const TensorInfo* data = nullptr;
  const TensorInfo* scales = nullptr;  // kQ8, kQ4
  // 32 for float forms (any precision derives from them exactly), else 8 / 4.
  int bits() const { return form == Form::kQ8 ? 8 : form == Form::kQ4 ? 4 : 32; }
};

// Finds `e` in `ck` in every form it may take (source dtype, F32, or for a
// matrix of a quantization group the int8 / int4 forms above) and checks dtype
// and shape. `tied_head`: `e` is the embedding bound as the tied lm_head (its
// quantized forms are accepted too). Errors name the file, the tensor, what was expected and found.
StatusOr<StoredTensor> find_stored(const Checkpoint& ck, const ExpectedTensor& e,
                                   bool tied_head = false);

// Checks every tensor the config implies (all_tensors(), or dense_tensors()
// for a dense-only container) with find_stored(). When `used` is given, it
// receives the full names of the tensors found.
Status check_tensors(const Checkpoint& ck, const ModelConfig& c, bool experts,
                     std::set<std::string>* used = nullptr);

// Tensors of `ck` not in `used` (full names), sorted, leaving out the tensors
// outside the language model (vision tower, projector).
std::vector<std::string> unused_tensors(const Checkpoint& ck, const std::set<std::string>& used);

}  // namespace k3::checkpoint
