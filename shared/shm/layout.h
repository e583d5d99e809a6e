// The expertd shared-memory segment (ARCHITECTURE.md, "The shared-memory data
// plane"): a header, per-client request and completion rings, the slot table,
// and the 4 KiB-aligned data region io_uring reads into.
//
// Everything shared is a lock-free std::atomic or written before publication,
// so a process that dies at any instruction leaves nothing locked:
//   - requests: one single-producer (client) / single-consumer (expertd) ring
//     per client; a doorbell futex wakes expertd;
//   - completions: one single-producer (expertd) / single-consumer (client)
//     ring per client, with its own futex;
//   - leases: bit `client` of a slot's `pins` mask. Only expertd sets bits (when
//     it hands a slot to a client); clients clear their own bit to release.
//     expertd never recycles a slot whose mask is non-zero, and clears the bits
//     of clients that died.
//   - `generation` changes whenever a slot's contents change; a client checks it
//     (with state, layer, expert) before and after computing on a slot.
#pragma once

#include <atomic>
#include <cstdint>

#include "shared/shm/read_span.h"

namespace k3::shm {

inline constexpr uint64_t kMagic = 0x4d48535344334b33ull;  // "K3DSSHM" + version byte
// 2: the model fingerprint is logical; 3: completions say whether a read was
// needed; 4: the header says whether expertd's reads are buffered; 5: the
// fingerprint covers sampled weights (shared/checkpoint/model_identity.h).
inline constexpr uint32_t kLayoutVersion = 5;
inline constexpr uint32_t kMaxClients = 64;  // bits of SlotEntry::pins
inline constexpr uint32_t kRingSize = 2048;  // power of two, > experts per layer
inline constexpr uint64_t kDataAlign = 4096;

enum class SlotState : uint32_t { kEmpty = 0, kReading = 1, kReady = 2, kFailed = 3 };
enum class ClientState : uint32_t { kFree = 0, kClaimed = 1, kActive = 2 };

struct Request {
  int32_t layer;
  int32_t expert;
  uint32_t tag;    // echoed in the completion
  uint32_t flags;  // kRequestPrefetch: read if missing, no lease, no completion
};
// A speculative read: behind every demand read, at most kSpeculativeInFlight
// of them reading at once, into an empty slot or the LRU tail only; dropped
// when neither is free. Its only completion is a kCompletionSpeculativeRead
// notice once its bytes are in.
inline constexpr uint32_t kRequestPrefetch = 1;
inline constexpr int kSpeculativeInFlight = 2;

struct Completion {
  uint32_t tag;
  uint32_t slot;
  uint32_t generation;
  int32_t status;  // 0 = ok (lease granted); else a StatusCode: not served, read failed, ...
  uint32_t flags;  // kCompletion* bits
};
// The expert was not resident and had to be read for this request.
inline constexpr uint32_t kCompletionRead = 1;
// The expert was read by a prefetch (speculatively) and this is the first
// request it serves: the speculation hid that read.
inline constexpr uint32_t kCompletionSpeculated = 2;
// Not a lease: a prefetch of this client finished reading an expert (slot
// UINT32_MAX, tag kSpeculativeReadTag); the client counts the bytes and
// drops it.
inline constexpr uint32_t kCompletionSpeculativeRead = 4;
inline constexpr uint32_t kSpeculativeReadTag = UINT32_MAX;

struct ClientArea {
  std::atomic<uint32_t> state;  // ClientState
  std::atomic<int32_t> pid;
  std::atomic<uint64_t> start_time;  // /proc/PID/stat field 22: pid reuse guard
  // Client -> expertd.
  std::atomic<uint64_t> req_head;  // written by the client
  std::atomic<uint64_t> req_tail;  // written by expertd
  Request req[kRingSize];
  // expertd -> client.
  std::atomic<uint64_t> comp_head;   // written by expertd
  std::atomic<uint64_t> comp_tail;   // written by the client
  std::atomic<uint32_t> comp_futex;  // bumped (and woken) after completions are published
  Completion comp[kRingSize];
};

struct SlotEntry {
  std::atomic<uint32_t> state;  // SlotState
  std::atomic<uint32_t> generation;
  std::atomic<int32_t> layer;
  std::atomic<int32_t> expert;
  std::atomic<uint64_t> pins;         // bit c = client c holds a lease
  std::atomic<uint64_t> data_offset;  // expert bytes start here, from the segment start
};

struct Header {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t header_bytes;
  uint64_t fingerprint;  // Checkpoint::fingerprint() of the model served (weights included)
  uint64_t epoch;        // random per expertd start: a client notices a restart
  std::atomic<int32_t> server_pid;
  std::atomic<uint32_t> ready;  // 1 once expertd serves; 0 while starting or stopping
  uint64_t server_start_time;
  uint64_t expert_bytes;
  uint64_t slot_stride;  // bytes between slot buffers (4 KiB multiple)
  uint32_t slot_count;
  uint32_t num_layers;   // model layers
  uint32_t num_experts;  // experts per MoE layer
  uint32_t first_moe_layer;
  uint64_t served_offset;   // bitmap [layers][experts] of what this instance serves
  uint64_t clients_offset;  // ClientArea[kMaxClients]
  uint64_t slots_offset;    // SlotEntry[slot_count]
  uint64_t data_offset;     // slot_count * slot_stride bytes, 4 KiB aligned
  uint64_t total_bytes;
  std::atomic<uint32_t> doorbell;  // bumped (and woken) by clients after posting requests
  uint32_t read_flags;             // kReadsBuffered; set before `magic`
};

// Header::read_flags: expertd reads through the page cache (buffered, not
// O_DIRECT): each read is a copy made by this host's cores.
inline constexpr uint32_t kReadsBuffered = 1;

// Byte layout of a segment for the given geometry.
struct Geometry {
  uint32_t num_layers = 0, num_experts = 0, first_moe_layer = 0, slot_count = 0;
  uint64_t expert_bytes = 0;
  // The read starts at the 4 KiB boundary below the expert's file offset:
  // up to 4 KiB of slack in front (read_span.h).
  uint64_t slot_stride() const { return expert_slot_stride(expert_bytes); }
  uint64_t served_offset() const { return (sizeof(Header) + 63) / 64 * 64; }
  uint64_t served_bytes() const {
    return (static_cast<uint64_t>(num_layers) * num_experts + 63) / 64 * 8;
  }
  uint64_t clients_offset() const { return (served_offset() + served_bytes() + 63) / 64 * 64; }
  uint64_t slots_offset() const { return clients_offset() + kMaxClients * sizeof(ClientArea); }
  uint64_t data_offset() const {
    const uint64_t end = slots_offset() + static_cast<uint64_t>(slot_count) * sizeof(SlotEntry);
    return (end + kDataAlign - 1) / kDataAlign * kDataAlign;
  }
  uint64_t total_bytes() const { return data_offset() + slot_count * slot_stride(); }
};

// Fills the header of a fresh (zeroed) segment with its geometry, model
// fingerprint and epoch. `magic`, `server_pid` and `ready` are left for the
// server to set when it starts serving.
inline void init_header(void* base, const Geometry& g, uint64_t fingerprint, uint64_t epoch) {
  Header* h = static_cast<Header*>(base);
  h->layout_version = kLayoutVersion;
  h->header_bytes = sizeof(Header);
  h->fingerprint = fingerprint;
  h->epoch = epoch;
  h->expert_bytes = g.expert_bytes;
  h->slot_stride = g.slot_stride();
  h->slot_count = g.slot_count;
  h->num_layers = g.num_layers;
  h->num_experts = g.num_experts;
  h->first_moe_layer = g.first_moe_layer;
  h->served_offset = g.served_offset();
  h->clients_offset = g.clients_offset();
  h->slots_offset = g.slots_offset();
  h->data_offset = g.data_offset();
  h->total_bytes = g.total_bytes();
}

// Views into a mapped segment.
inline Header* header_of(void* base) {
  return static_cast<Header*>(base);
}
inline ClientArea* clients_of(void* base) {
  return reinterpret_cast<ClientArea*>(static_cast<char*>(base) + header_of(base)->clients_offset);
}
inline SlotEntry* slots_of(void* base) {
  return reinterpret_cast<SlotEntry*>(static_cast<char*>(base) + header_of(base)->slots_offset);
}
inline std::atomic<uint64_t>* served_of(void* base) {
  return reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(base) +
                                                  header_of(base)->served_offset);
}
inline bool serves(void* base, uint32_t layer, uint32_t expert) {
  const Header* h = header_of(base);
  if (layer >= h->num_layers || expert >= h->num_experts) return false;
  const uint64_t bit = static_cast<uint64_t>(layer) * h->num_experts + expert;
  return (served_of(base)[bit / 64].load(std::memory_order_relaxed) >> (bit % 64)) & 1;
}

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared atomics must be lock-free");

}  // namespace k3::shm
