// safetensors: parsing one file's header (untrusted input).
//
// Layout: u64 little-endian header length N, N bytes of JSON, then the data
// region. The JSON maps tensor names to {dtype, shape, data_offsets:[begin,end)}
// (offsets relative to the data region) plus an optional "__metadata__" object
// of string values. Every length, offset and shape product is checked for
// overflow and against the file size; overlapping tensors, unknown dtypes and
// duplicate names are refused with a message naming the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "shared/checkpoint/dtype.h"
#include "shared/status.h"

namespace k3::checkpoint {

// Largest header we accept. The real checkpoint's shards carry headers of a
// few hundred KB; anything near this is a corrupt or hostile file.
inline constexpr uint64_t kMaxSafetensorsHeader = 64ull << 20;
// Most dimensions a tensor may have.
inline constexpr size_t kMaxTensorRank = 8;

// One tensor as a file's header describes it.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t nbytes = 0;
  uint32_t file = 0;  // index of the file in its Checkpoint (0 for a lone file)

  int64_t numel() const;
  // Rows and columns when viewed as a matrix: [d0, d1*d2*...]; a 1-D tensor is
  // one row; a 0-D tensor one element.
  int64_t rows() const;
  int64_t cols() const;
};

struct SafetensorsHeader {
  uint64_t data_start = 0;  // 8 + header length
  uint64_t file_size = 0;
  std::vector<TensorInfo> tensors;  // in data-offset order
  std::map<std::string, std::string> metadata;
};

// Parses header JSON `json` of a file of `file_size` bytes whose data region
// starts at `data_start`. `label` names the file in error messages.
StatusOr<SafetensorsHeader> parse_safetensors_header(std::string_view json, uint64_t data_start,
                                                     uint64_t file_size, std::string_view label);

// Parses a whole file image held in memory (length prefix + header + data);
// used by the fuzzer and tests.
StatusOr<SafetensorsHeader> parse_safetensors_image(std::string_view image, std::string_view label);

// Reads and parses the header of the file at `path` (opened read-only).
StatusOr<SafetensorsHeader> read_safetensors_header(const std::string& path);

}  // namespace k3::checkpoint
