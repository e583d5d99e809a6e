// expertd's drive reader: one io_uring with the shard files registered
// (opened through k3::File, O_DIRECT where every file allows it) and, where
// the kernel allows, the segment's data region registered as fixed buffers.
// RAII: the destructor tears the ring down and closes the files.
//
// Thread-safety: queue()/submit() from one thread and wait()/drain() from
// one thread, each pair serialised by the caller (expertd holds its mutex
// around queue/submit/drain; wait() runs without it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shared/status.h"

namespace k3::expertd {

struct ReaderOptions {
  int queue_depth = 64;  // reads in flight
  bool direct = true;    // O_DIRECT (buffered for all files where one refuses)
};

class UringReader {
 public:
  // Opens `files` and sets up the ring. Reads land in [buffer, buffer +
  // buffer_bytes), registered in pieces that are multiples of `stride`.
  static StatusOr<std::unique_ptr<UringReader>> open(const std::vector<std::string>& files,
                                                     const ReaderOptions& opt, uint8_t* buffer,
                                                     uint64_t buffer_bytes, uint64_t stride);
  ~UringReader();
  UringReader(const UringReader&) = delete;
  UringReader& operator=(const UringReader&) = delete;

  bool direct() const;
  bool fixed_buffers() const;

  // Queues a read of `len` bytes at `offset` of file `file` into `dst`
  // (inside the buffer); `user` comes back with its completion. False when
  // the submission queue is full.
  bool queue(uint32_t file, uint64_t offset, uint8_t* dst, uint32_t len, uint64_t user);
  // Hands the queued reads to the kernel.
  void submit();
  // Waits until a completion is ready, at most timeout_ms. False on timeout
  // or interruption.
  bool wait(int timeout_ms);
  // Calls fn(user, result) for every ready completion (result: bytes read or
  // -errno); returns how many.
  size_t drain(const std::function<void(uint64_t user, int result)>& fn);

 private:
  struct Impl;
  explicit UringReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::expertd
