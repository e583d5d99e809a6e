#include "tools/k3ctl/drive_ceiling.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>

#include "shared/shm/read_span.h"

namespace k3::tools {

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What one measurement holds open: the files, the ring, the buffers.
struct ReadRig {
  std::vector<int> fds;
  io_uring ring{};
  bool ring_up = false;
  void* buf = nullptr;
  bool owns_buf = false;
  ~ReadRig() {
    if (ring_up) io_uring_queue_exit(&ring);
    if (owns_buf) std::free(buf);
    for (int f : fds) ::close(f);
  }
};

}  // namespace

StatusOr<double> uring_read_gbps(const std::vector<std::string>& paths,
                                 const std::function<ReadChunk()>& next, int qd, uint64_t chunk,
                                 double seconds, bool direct, const std::vector<uint8_t*>& dests) {
  // Destinations: the caller's chunks, else qd chunks of the call's own.
  const bool own = dests.empty();
  if (!own && static_cast<int>(dests.size()) < qd)
    return absl::InvalidArgumentError(
        cat(dests.size(), " read destinations for queue depth ", qd, ": at least ", qd));
  const int slots = own ? qd : static_cast<int>(dests.size());
  ReadRig rig;
  for (const std::string& p : paths) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
    if (fd < 0)
      return absl::FailedPreconditionError(
          cat(p, direct ? ": O_DIRECT refused (" : ": cannot open (", std::strerror(errno), ")"));
    rig.fds.push_back(fd);
  }
  if (int r = io_uring_queue_init(static_cast<unsigned>(qd * 2), &rig.ring, 0); r < 0)
    return absl::UnavailableError(cat("io_uring: ", std::strerror(-r)));
  rig.ring_up = true;
  std::vector<char*> dst_of(static_cast<size_t>(slots));
  if (!own) {
    for (int i = 0; i < slots; ++i) dst_of[i] = reinterpret_cast<char*>(dests[i]);
  } else {
    if (posix_memalign(&rig.buf, 4096, static_cast<size_t>(qd) * chunk) != 0)
      return absl::ResourceExhaustedError("buffer");
    rig.owns_buf = true;
    for (int i = 0; i < qd; ++i)
      dst_of[i] = static_cast<char*>(rig.buf) + static_cast<size_t>(i) * chunk;
  }
  // Registered (pre-pinned) buffers and files, as expertd uses: the ceiling
  // without per-read page pinning.
  std::vector<iovec> iov(static_cast<size_t>(slots));
  for (int i = 0; i < slots; ++i) iov[i] = {dst_of[i], chunk};
  const bool fixed =
      io_uring_register_buffers(&rig.ring, iov.data(), static_cast<unsigned>(slots)) == 0 &&
      io_uring_register_files(&rig.ring, rig.fds.data(), static_cast<unsigned>(rig.fds.size())) ==
          0;
  uint64_t bytes = 0;
  int inflight = 0;
  const auto t0 = Clock::now();
  // Free destinations, oldest first: every one of them takes its turn (a
  // stack would keep reusing the last qd).
  std::deque<int> free_bufs;
  for (int i = 0; i < slots; ++i) free_bufs.push_back(i);
  Status err;
  while (err.ok() && (secs(t0) < seconds || inflight > 0)) {
    while (inflight < qd && secs(t0) < seconds) {
      const ReadChunk rc = next();
      const int b = free_bufs.front();
      free_bufs.pop_front();
      io_uring_sqe* sqe = io_uring_get_sqe(&rig.ring);
      char* dst = dst_of[static_cast<size_t>(b)];
      const auto len = static_cast<unsigned>(std::min(rc.length, chunk));
      if (fixed) {
        io_uring_prep_read_fixed(sqe, rc.file, dst, len, rc.offset, b);
        sqe->flags |= IOSQE_FIXED_FILE;
      } else {
        io_uring_prep_read(sqe, rig.fds[static_cast<size_t>(rc.file)], dst, len, rc.offset);
      }
      // Buffered reads as expertd posts them: copied by io_uring's workers
      // on every core, not inline by this thread (UringReader::queue).
      if (!direct) sqe->flags |= IOSQE_ASYNC;
      io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(b));
      ++inflight;
    }
    io_uring_submit(&rig.ring);
    io_uring_cqe* cqe;
    if (io_uring_wait_cqe(&rig.ring, &cqe) < 0) break;
    if (cqe->res < 0)
      err = absl::DataLossError(cat("read failed: ", std::strerror(-cqe->res)));
    else
      bytes += static_cast<uint64_t>(cqe->res);
    free_bufs.push_back(static_cast<int>(io_uring_cqe_get_data64(cqe)));
    io_uring_cqe_seen(&rig.ring, cqe);
    --inflight;
  }
  const double gbps = static_cast<double>(bytes) / secs(t0) / 1e9;
  K3_RETURN_IF_ERROR(err);
  return gbps;
}

ExpertRangeStream::ExpertRangeStream(const checkpoint::ExpertIndex& idx,
                                     const checkpoint::ModelConfig& c, uint64_t chunk,
                                     uint64_t seed)
    : idx_(idx),
      first_(c.first_k_dense_replace),
      layers_(c.num_moe_layers()),
      experts_(c.num_experts),
      k_(std::min<int64_t>(c.num_experts_per_token, c.num_experts)),
      chunk_(chunk),
      rng_(seed) {}

ReadChunk ExpertRangeStream::next() {
  if (cur_off_ >= cur_end_) {
    if (batch_pos_ == batch_.size()) {
      batch_.clear();
      batch_pos_ = 0;
      // Draws as bench io's Stream makes them: a (layer, expert) pair each
      // time, one half of it used.
      const int64_t layer = first_ + static_cast<int64_t>(rng_() % layers_);
      rng_();
      std::vector<int64_t> ids;
      while (static_cast<int64_t>(ids.size()) < k_) {
        rng_();
        const int64_t e = static_cast<int64_t>(rng_() % experts_);
        if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
      }
      for (int64_t e : ids) batch_.push_back({idx_.at(layer, e).file, idx_.at(layer, e).offset});
      std::sort(batch_.begin(), batch_.end());
    }
    const auto [f, o] = batch_[batch_pos_++];
    cur_file_ = static_cast<int>(f);
    const shm::ReadSpan span = shm::expert_read_span(o, idx_.expert_bytes(), /*direct=*/true);
    cur_off_ = span.file_offset;
    cur_end_ = span.file_offset + span.length;
  }
  ReadChunk r{cur_file_, cur_off_, std::min(chunk_, cur_end_ - cur_off_)};
  cur_off_ += r.length;
  return r;
}

StatusOr<double> raw_read_gbps(const checkpoint::Checkpoint& ck, ExpertRangeStream& stream, int qd,
                               double seconds, bool direct, const std::vector<uint8_t*>& dests) {
  return uring_read_gbps(
      ck.files(), [&] { return stream.next(); }, qd, stream.chunk(), seconds, direct, dests);
}

StatusOr<double> raw_read_gbps(const checkpoint::Checkpoint& ck, const checkpoint::ExpertIndex& idx,
                               const checkpoint::ModelConfig& c, int qd, uint64_t chunk,
                               double seconds, bool direct) {
  ExpertRangeStream stream(idx, c, chunk);
  return raw_read_gbps(ck, stream, qd, seconds, direct);
}

}  // namespace k3::tools
