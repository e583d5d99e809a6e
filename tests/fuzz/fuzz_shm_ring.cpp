// libFuzzer target: the shared-memory ring entries as a hostile local client
// writes them. A real segment (shared/shm/segment.h) with a real header; the
// input is a client's writes into its area (state, pid, ring indices, request
// entries, even the server-owned indices and slot entries: the segment is
// writable by any client), interleaved with the server-side ring code
// (ServerRing: drain, publish, wake, reclaim dead clients) answering requests
// the way expertd does (served experts get a lease, others an error). The
// server must stay within the segment and never take more than one ring per
// client per drain.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "shared/shm/layout.h"
#include "shared/shm/segment.h"
#include "shared/shm/server_ring.h"

using namespace k3::shm;

namespace {

struct World {
  std::string name = "k3fuzz-ring-" + std::to_string(::getpid());
  Segment seg;
  Geometry g;
  World() {
    g.num_layers = 6;
    g.num_experts = 8;
    g.first_moe_layer = 1;
    g.slot_count = 5;
    g.expert_bytes = 4096;
    Segment::remove(name);
    auto s = Segment::create(name, g.total_bytes());
    if (!s.ok()) __builtin_trap();
    seg = std::move(*s);
    std::atexit([] { Segment::remove("k3fuzz-ring-" + std::to_string(::getpid())); });
  }
  void reset() {
    std::memset(seg.base(), 0, g.data_offset());
    init_header(seg.base(), g, 0x6b33, 1);
    for (uint32_t l = g.first_moe_layer; l < g.num_layers; ++l)
      for (uint32_t e = 0; e < g.num_experts; e += 2) {  // every other expert served
        const uint64_t bit = uint64_t{l} * g.num_experts + e;
        served_of(seg.base())[bit / 64].fetch_or(1ull << (bit % 64));
      }
    Header* h = header_of(seg.base());
    h->server_pid.store(::getpid());
    h->magic = kMagic;
    h->ready.store(1);
  }
};

World& world() {
  static World w;
  return w;
}

struct Input {
  const uint8_t* p;
  size_t n;
  bool empty() const { return n == 0; }
  template <typename T>
  T take() {
    T v{};
    const size_t k = std::min(n, sizeof(T));
    std::memcpy(&v, p, k);
    p += k;
    n -= k;
    return v;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = world();
  w.reset();
  void* base = w.seg.base();
  const Header* h = header_of(base);
  ClientArea* clients = clients_of(base);
  SlotEntry* slots = slots_of(base);
  ServerRing ring(base);
  Input in{data, size};
  while (!in.empty()) {
    const uint8_t op = in.take<uint8_t>();
    ClientArea& ca = clients[in.take<uint8_t>() % kMaxClients];
    switch (op % 8) {
      case 0:  // claim the area as some process
        ca.state.store(in.take<uint32_t>() % 4);
        ca.pid.store(in.take<uint8_t>() % 2 ? ::getpid() : in.take<int32_t>());
        ca.start_time.store(in.take<uint8_t>() % 2 ? 0 : in.take<uint64_t>());
        break;
      case 1:  // one request entry, raw
        ca.req[in.take<uint16_t>() % kRingSize] = in.take<Request>();
        break;
      case 2:
        ca.req_head.store(in.take<uint64_t>());
        break;
      case 3:  // server-owned, but writable by a client
        ca.req_tail.store(in.take<uint64_t>());
        break;
      case 4:
        ca.comp_tail.store(in.take<uint64_t>());
        break;
      case 5:
        ca.comp_head.store(in.take<uint64_t>());
        break;
      case 6: {  // a slot entry, raw
        SlotEntry& s = slots[in.take<uint8_t>() % h->slot_count];
        s.state.store(in.take<uint32_t>());
        s.generation.store(in.take<uint32_t>());
        s.pins.store(in.take<uint64_t>());
        break;
      }
      default: {  // the server's turn
        size_t per_client[kMaxClients] = {};
        const size_t taken = ring.drain_requests([&](uint32_t c, const Request& r) {
          if (c >= kMaxClients) __builtin_trap();
          if (++per_client[c] > kRingSize) __builtin_trap();
          // As expertd: only a served (layer, expert) gets a slot and a lease.
          if (r.layer >= 0 && r.expert >= 0 &&
              serves(base, static_cast<uint32_t>(r.layer), static_cast<uint32_t>(r.expert))) {
            const uint32_t slot =
                static_cast<uint32_t>(r.layer * h->num_experts + r.expert) % h->slot_count;
            if (!(r.flags & kRequestPrefetch)) ring.publish(c, r.tag, slot, 0, 0);
          } else {
            ring.publish(c, r.tag, UINT32_MAX, 5 /* NOT_FOUND */, 0);
          }
        });
        if (taken > size_t{kMaxClients} * kRingSize) __builtin_trap();
        ring.wake_pending();
        ring.reclaim_dead_clients([](uint32_t c, int, uint32_t) {
          if (c >= kMaxClients) __builtin_trap();
        });
        if (ring.pinned_slots() > h->slot_count || ring.active_clients() > kMaxClients)
          __builtin_trap();
      }
    }
  }
  return 0;
}
