// A lease on one expert slot of an expertd segment: the client's pin bit in
// the slot's `pins` mask (layout.h). Move-only, like DuckDB's BufferHandle:
// made only after checking that the slot holds what the completion promised,
// `valid()` checks again, and the destructor unpins.
//
// Not thread-safe; the segment mapping must outlive the lease.
#pragma once

#include <cstdint>

#include "shared/shm/layout.h"
#include "shared/status.h"

namespace k3::shm {

class ExpertLease {
 public:
  ExpertLease() = default;
  ~ExpertLease() { release(); }
  ExpertLease(const ExpertLease&) = delete;
  ExpertLease& operator=(const ExpertLease&) = delete;
  ExpertLease(ExpertLease&& o) noexcept { *this = static_cast<ExpertLease&&>(o); }
  ExpertLease& operator=(ExpertLease&& o) noexcept;

  // Takes over the pin expertd granted to `client` with completion `cp`
  // (status 0) for expert `expert` of `layer`, in the segment mapped at
  // `base` whose epoch the client saw as `epoch`. DATA_LOSS (and the pin is
  // dropped) when the slot does not hold that expert as granted.
  static StatusOr<ExpertLease> adopt(void* base, uint32_t client, uint64_t epoch,
                                     const Completion& cp, int32_t layer, int32_t expert);

  // The slot still holds the leased expert, unchanged, and the pin is held.
  bool valid() const;
  // The expert's bytes (ExpertIndex::layout()); null for an empty lease.
  const uint8_t* data() const { return data_; }
  uint32_t slot() const { return slot_; }
  // Unpins now (idempotent).
  void release();

 private:
  void* base_ = nullptr;
  SlotEntry* entry_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint64_t bit_ = 0;
  uint64_t epoch_ = 0;
  uint32_t slot_ = 0;
  uint32_t generation_ = 0;
  int32_t layer_ = -1, expert_ = -1;
};

}  // namespace k3::shm
