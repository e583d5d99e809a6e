// The byte span an expert read covers, and the buffer stride it needs. One
// helper for every reader of expert bytes (engined's pread source, expertd's
// io_uring reader, `k3ctl bench io`): O_DIRECT reads start and end on 4 KiB
// boundaries, so they begin up to 4 KiB before the expert and the expert's
// bytes start `lead` bytes into the buffer.
#pragma once

#include <cstdint>

namespace k3::shm {

inline constexpr uint64_t kDirectAlign = 4096;

struct ReadSpan {
  uint64_t file_offset = 0;  // where the read starts
  uint64_t length = 0;       // bytes to read (a 4 KiB multiple with O_DIRECT)
  uint64_t needed = 0;       // bytes that must arrive: to the expert's last byte
  uint64_t lead = 0;         // the expert starts this far into the buffer
};

// The span reading `bytes` bytes at file offset `offset`.
inline ReadSpan expert_read_span(uint64_t offset, uint64_t bytes, bool direct) {
  ReadSpan s;
  if (!direct) {
    s.file_offset = offset;
    s.length = s.needed = bytes;
    return s;
  }
  s.file_offset = offset & ~(kDirectAlign - 1);
  const uint64_t end = (offset + bytes + kDirectAlign - 1) & ~(kDirectAlign - 1);
  s.length = end - s.file_offset;
  s.lead = offset - s.file_offset;
  s.needed = s.lead + bytes;
  return s;
}

// Bytes between expert buffers: room for any span of `expert_bytes` (up to
// 4 KiB of lead plus the rounded-up tail), a 4 KiB multiple.
inline uint64_t expert_slot_stride(uint64_t expert_bytes) {
  return ((expert_bytes + kDirectAlign - 1) / kDirectAlign + 1) * kDirectAlign;
}

}  // namespace k3::shm
