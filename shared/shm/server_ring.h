// The expertd half of the shared-memory ring protocol (layout.h): drains the
// clients' request rings, publishes completions (granting a pin with every ok
// one), wakes clients, and reclaims the areas and pins of clients that died.
//
// Not thread-safe: the caller serialises calls (expertd holds its mutex).
// The segment mapping must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "shared/shm/layout.h"

namespace k3::shm {

class ServerRing {
 public:
  ServerRing() = default;
  // Over the segment mapped at `base`, its header filled in by the server.
  explicit ServerRing(void* base);

  // Calls fn(client, request) for every request of every active client, in
  // ring order per client. Returns how many requests were taken.
  size_t drain_requests(const std::function<void(uint32_t client, const Request&)>& fn);

  // Publishes a completion to `client` (if it is still active): status 0
  // grants a lease (sets the client's pin bit on `slot` first; a slot past
  // the slot table, as in a kCompletionSpeculativeRead notice, grants
  // nothing), anything else is an error code. The client is woken by wake_pending(). False when the
  // client is gone or its completion ring is full (the completion is lost;
  // the client times out).
  bool publish(uint32_t client, uint32_t tag, uint32_t slot, int32_t status, uint32_t flags);
  // Wakes every client that got completions since the last call.
  void wake_pending();
  // Wakes every client (expertd stopping).
  void wake_all();

  // The doorbell's value: read it before draining, wait on it after finding
  // nothing to do.
  uint32_t doorbell() const;
  // Sleeps until a client rings after `seen`, at most timeout_ms.
  bool wait_doorbell(uint32_t seen, int timeout_ms);

  // Frees the areas of clients whose process died and clears their pins;
  // calls on_dead(client, pid, leases released) for each before the area is
  // reused. Returns the number reclaimed.
  uint32_t reclaim_dead_clients(
      const std::function<void(uint32_t client, int pid, uint32_t released)>& on_dead);

  bool pinned(uint32_t slot) const;
  uint32_t pinned_slots() const;
  uint32_t active_clients() const;

 private:
  void* base_ = nullptr;
  Header* hdr_ = nullptr;
  ClientArea* clients_ = nullptr;
  SlotEntry* slots_ = nullptr;
  uint64_t pending_wake_ = 0;  // bit c: client c got completions
};

}  // namespace k3::shm
