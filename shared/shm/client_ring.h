// The client half of the shared-memory ring protocol (layout.h): claims a
// client area of a mapped expertd segment, posts requests, rings the
// doorbell, drains completions and turns granted slots into ExpertLeases.
// Releasing the area (destructor) drops every pin the client still holds.
//
// Not thread-safe: one thread drives a ClientRing. The segment mapping must
// outlive it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/shm/expert_lease.h"
#include "shared/shm/layout.h"
#include "shared/status.h"

namespace k3::shm {

class ClientRing {
 public:
  ClientRing() = default;
  ~ClientRing() { detach(); }
  ClientRing(const ClientRing&) = delete;
  ClientRing& operator=(const ClientRing&) = delete;
  ClientRing(ClientRing&& o) noexcept { *this = static_cast<ClientRing&&>(o); }
  ClientRing& operator=(ClientRing&& o) noexcept;

  // Claims a free client area of the segment mapped at `base` (its header
  // already checked by the caller) for this process. RESOURCE_EXHAUSTED when
  // all kMaxClients areas are taken.
  static StatusOr<ClientRing> attach(void* base);
  // Clears this client's pins and frees its area (idempotent).
  void detach();
  bool attached() const { return area_ != nullptr; }

  uint32_t client() const { return client_; }
  // The server epoch seen at attach time.
  uint64_t epoch() const { return epoch_; }
  const Header& header() const { return *header_of(base_); }

  // Requests posted and not yet taken by expertd.
  uint64_t requests_queued() const;
  // Posts one request; false (nothing posted) while the ring is full.
  bool post(const Request& r);
  // Wakes expertd to look at the posted requests.
  void ring_doorbell();

  // The completion futex word's value: read it before draining, wait on it
  // after finding nothing, so a completion published in between is not missed.
  uint32_t completion_seq() const;
  // Appends every published completion to `out`; returns how many.
  size_t drain(std::vector<Completion>* out);
  // Sleeps until completions may have arrived after `seen` (completion_seq()),
  // at most timeout_ms. False on timeout.
  bool wait(uint32_t seen, int timeout_ms);

  // Releases the pin an ok completion granted, unused (a completion nobody
  // waits for any more). No-op for an error completion.
  void drop_grant(const Completion& cp);
  // The lease of an ok completion for expert `expert` of `layer`.
  StatusOr<ExpertLease> lease(const Completion& cp, int32_t layer, int32_t expert) const;

  // expertd marked the segment ready and its process exists (a cheap check).
  bool server_running() const;
  // As server_running(), with the pid-reuse guard (reads /proc) and the same
  // epoch as at attach time.
  bool server_alive() const;

 private:
  void* base_ = nullptr;
  ClientArea* area_ = nullptr;
  uint32_t client_ = 0;
  uint64_t epoch_ = 0;
};

}  // namespace k3::shm
