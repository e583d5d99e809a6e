#include "shared/shm/server_ring.h"

#include "shared/shm/futex.h"

namespace k3::shm {
namespace {
bool active(const ClientArea& ca) {
  return ca.state.load(std::memory_order_acquire) == static_cast<uint32_t>(ClientState::kActive);
}
}  // namespace

ServerRing::ServerRing(void* base)
    : base_(base), hdr_(header_of(base)), clients_(clients_of(base)), slots_(slots_of(base)) {}

size_t ServerRing::drain_requests(const std::function<void(uint32_t, const Request&)>& fn) {
  size_t n = 0;
  for (uint32_t c = 0; c < kMaxClients; ++c) {
    ClientArea& ca = clients_[c];
    if (!active(ca)) continue;
    uint64_t tail = ca.req_tail.load(std::memory_order_relaxed);
    const uint64_t head = ca.req_head.load(std::memory_order_acquire);
    // A client's head is untrusted: never read more than one ring's worth.
    if (head - tail > kRingSize) tail = head - kRingSize;
    for (; tail < head; ++tail, ++n) {
      const Request r = ca.req[tail % kRingSize];
      fn(c, r);
    }
    ca.req_tail.store(tail, std::memory_order_release);
  }
  return n;
}

bool ServerRing::publish(uint32_t client, uint32_t tag, uint32_t slot, int32_t status,
                         uint32_t flags) {
  if (client >= kMaxClients) return false;
  ClientArea& ca = clients_[client];
  if (!active(ca)) return false;
  const uint64_t head = ca.comp_head.load(std::memory_order_relaxed);
  if (head - ca.comp_tail.load(std::memory_order_acquire) >= kRingSize) return false;
  Completion& cp = ca.comp[head % kRingSize];
  cp.tag = tag;
  cp.slot = slot;
  cp.generation =
      slot < hdr_->slot_count ? slots_[slot].generation.load(std::memory_order_relaxed) : 0;
  cp.status = status;
  cp.flags = flags;
  if (status == 0 && slot < hdr_->slot_count)
    slots_[slot].pins.fetch_or(1ull << client, std::memory_order_acq_rel);
  ca.comp_head.store(head + 1, std::memory_order_release);
  pending_wake_ |= 1ull << client;
  return true;
}

void ServerRing::wake_pending() {
  for (uint32_t c = 0; pending_wake_ != 0 && c < kMaxClients; ++c) {
    if (!(pending_wake_ & (1ull << c))) continue;
    pending_wake_ &= ~(1ull << c);
    clients_[c].comp_futex.fetch_add(1, std::memory_order_release);
    futex_wake_all(&clients_[c].comp_futex);
  }
}

void ServerRing::wake_all() {
  pending_wake_ = ~0ull;
  wake_pending();
}

uint32_t ServerRing::doorbell() const {
  return hdr_->doorbell.load(std::memory_order_acquire);
}

bool ServerRing::wait_doorbell(uint32_t seen, int timeout_ms) {
  return futex_wait(&hdr_->doorbell, seen, timeout_ms);
}

uint32_t ServerRing::reclaim_dead_clients(
    const std::function<void(uint32_t, int, uint32_t)>& on_dead) {
  uint32_t reclaimed = 0;
  for (uint32_t c = 0; c < kMaxClients; ++c) {
    ClientArea& ca = clients_[c];
    if (ca.state.load(std::memory_order_acquire) == static_cast<uint32_t>(ClientState::kFree))
      continue;
    const int pid = ca.pid.load(std::memory_order_acquire);
    if (pid == 0 || process_alive(pid, ca.start_time.load())) continue;
    const uint64_t bit = 1ull << c;
    uint32_t released = 0;
    for (uint32_t i = 0; i < hdr_->slot_count; ++i)
      if (slots_[i].pins.fetch_and(~bit, std::memory_order_acq_rel) & bit) ++released;
    on_dead(c, pid, released);
    ca.pid.store(0, std::memory_order_relaxed);
    ca.state.store(static_cast<uint32_t>(ClientState::kFree), std::memory_order_release);
    ++reclaimed;
  }
  return reclaimed;
}

bool ServerRing::pinned(uint32_t slot) const {
  return slots_[slot].pins.load(std::memory_order_acquire) != 0;
}

uint32_t ServerRing::pinned_slots() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < hdr_->slot_count; ++i) n += pinned(i);
  return n;
}

uint32_t ServerRing::active_clients() const {
  uint32_t n = 0;
  for (uint32_t c = 0; c < kMaxClients; ++c) n += active(clients_[c]);
  return n;
}

}  // namespace k3::shm
