#include "shared/shm/client_ring.h"

#include <signal.h>
#include <unistd.h>

#include "shared/shm/futex.h"

namespace k3::shm {

ClientRing& ClientRing::operator=(ClientRing&& o) noexcept {
  if (this == &o) return *this;
  detach();
  base_ = o.base_;
  area_ = o.area_;
  client_ = o.client_;
  epoch_ = o.epoch_;
  o.area_ = nullptr;
  o.base_ = nullptr;
  return *this;
}

StatusOr<ClientRing> ClientRing::attach(void* base) {
  ClientArea* areas = clients_of(base);
  const int pid = ::getpid();
  const uint64_t start = process_start_time(pid);
  for (uint32_t c = 0; c < kMaxClients; ++c) {
    uint32_t expected = static_cast<uint32_t>(ClientState::kFree);
    if (!areas[c].state.compare_exchange_strong(expected,
                                                static_cast<uint32_t>(ClientState::kClaimed)))
      continue;
    ClientArea& ca = areas[c];
    ca.start_time.store(start);
    ca.pid.store(pid, std::memory_order_release);
    // Start the rings where expertd's cursors are.
    ca.req_head.store(ca.req_tail.load(std::memory_order_acquire), std::memory_order_release);
    ca.comp_tail.store(ca.comp_head.load(std::memory_order_acquire), std::memory_order_release);
    ca.state.store(static_cast<uint32_t>(ClientState::kActive), std::memory_order_release);
    ClientRing r;
    r.base_ = base;
    r.area_ = &ca;
    r.client_ = c;
    r.epoch_ = header_of(base)->epoch;
    return r;
  }
  return absl::ResourceExhaustedError(cat("no free client area (", kMaxClients, " in use)"));
}

void ClientRing::detach() {
  if (area_ == nullptr) return;
  const uint64_t bit = 1ull << client_;
  SlotEntry* slots = slots_of(base_);
  for (uint32_t i = 0; i < header_of(base_)->slot_count; ++i)
    slots[i].pins.fetch_and(~bit, std::memory_order_acq_rel);
  area_->pid.store(0);
  area_->state.store(static_cast<uint32_t>(ClientState::kFree), std::memory_order_release);
  area_ = nullptr;
  base_ = nullptr;
}

uint64_t ClientRing::requests_queued() const {
  return area_->req_head.load(std::memory_order_relaxed) -
         area_->req_tail.load(std::memory_order_acquire);
}

bool ClientRing::post(const Request& r) {
  if (requests_queued() >= kRingSize) return false;
  const uint64_t head = area_->req_head.load(std::memory_order_relaxed);
  area_->req[head % kRingSize] = r;
  area_->req_head.store(head + 1, std::memory_order_release);
  return true;
}

void ClientRing::ring_doorbell() {
  Header* h = header_of(base_);
  h->doorbell.fetch_add(1, std::memory_order_release);
  futex_wake_all(&h->doorbell);
}

uint32_t ClientRing::completion_seq() const {
  return area_->comp_futex.load(std::memory_order_acquire);
}

size_t ClientRing::drain(std::vector<Completion>* out) {
  uint64_t tail = area_->comp_tail.load(std::memory_order_relaxed);
  const uint64_t head = area_->comp_head.load(std::memory_order_acquire);
  size_t n = 0;
  for (; tail < head; ++tail, ++n) out->push_back(area_->comp[tail % kRingSize]);
  area_->comp_tail.store(tail, std::memory_order_release);
  return n;
}

bool ClientRing::wait(uint32_t seen, int timeout_ms) {
  return futex_wait(&area_->comp_futex, seen, timeout_ms);
}

StatusOr<ExpertLease> ClientRing::lease(const Completion& cp, int32_t layer, int32_t expert) const {
  return ExpertLease::adopt(base_, client_, epoch_, cp, layer, expert);
}

void ClientRing::drop_grant(const Completion& cp) {
  if (cp.status != 0 || cp.slot >= header_of(base_)->slot_count) return;
  slots_of(base_)[cp.slot].pins.fetch_and(~(1ull << client_), std::memory_order_acq_rel);
}

bool ClientRing::server_running() const {
  const Header* h = header_of(base_);
  return h->ready.load(std::memory_order_acquire) == 1 &&
         ::kill(h->server_pid.load(std::memory_order_acquire), 0) == 0;
}

bool ClientRing::server_alive() const {
  const Header* h = header_of(base_);
  return h->ready.load(std::memory_order_acquire) == 1 && h->epoch == epoch_ &&
         process_alive(h->server_pid.load(std::memory_order_acquire), h->server_start_time);
}

}  // namespace k3::shm
