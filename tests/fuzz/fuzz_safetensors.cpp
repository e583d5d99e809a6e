// libFuzzer target: the safetensors header parser on arbitrary file images,
// and the model identity stamp read from an accepted header's metadata.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shared/checkpoint/model_identity.h"
#include "shared/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = k3::checkpoint::parse_safetensors_image(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (h.ok()) {
    // Invariants of an accepted header: every tensor inside the data region,
    // sorted, non-overlapping.
    uint64_t end = h->data_start;
    for (const auto& t : h->tensors) {
      if (t.offset < h->data_start || t.offset + t.nbytes > h->file_size) __builtin_trap();
      if (t.nbytes != 0 && t.offset < end) __builtin_trap();
      if (t.nbytes != 0) end = t.offset + t.nbytes;
    }
    // A stamp is 16 lower-case hex digits or an error, never a crash; an
    // accepted one reads back as itself.
    auto stamp = k3::checkpoint::read_stamp(*h, "fuzz");
    if (stamp.ok() && stamp->has_value()) {
      auto it = h->metadata.find(k3::checkpoint::kFingerprintMetadataKey);
      if (it == h->metadata.end() || k3::base::hex64(**stamp) != it->second) __builtin_trap();
    }
  }
  return 0;
}
