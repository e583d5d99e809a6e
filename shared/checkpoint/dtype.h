// Tensor element types as safetensors names them.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace k3::checkpoint {

// Every dtype the safetensors format defines. The engine computes on BF16, F16,
// F32 (dense) and U8 (MXFP4 experts); the others parse but are refused where a
// tensor of this model is expected.
enum class DType {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

// "BF16" -> kBF16; nullopt for a name safetensors does not define.
std::optional<DType> dtype_from_name(std::string_view name);
std::string_view dtype_name(DType t);
// Bytes per element.
size_t dtype_size(DType t);
// True for the float types a dense tensor may be stored in (BF16, F16, F32).
inline bool is_dense_float(DType t) {
  return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32;
}

}  // namespace k3::checkpoint
