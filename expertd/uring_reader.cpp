#include "expertd/uring_reader.h"

#include <fcntl.h>
#include <liburing.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "shared/base/file.h"
#include "shared/base/log.h"

namespace k3::expertd {
namespace {
constexpr uint64_t kRegisteredPiece = 1ull << 30;  // io_uring fixed buffers are <= 1 GiB
}  // namespace

struct UringReader::Impl {
  io_uring ring{};
  bool ring_ok = false;
  bool fixed = false;
  bool direct = false;
  std::vector<base::File> files;
  uint8_t* buffer = nullptr;
  uint64_t piece = 0;  // bytes per registered buffer

  ~Impl() {
    if (ring_ok) io_uring_queue_exit(&ring);
  }
};

UringReader::UringReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UringReader::~UringReader() = default;

StatusOr<std::unique_ptr<UringReader>> UringReader::open(const std::vector<std::string>& files,
                                                         const ReaderOptions& opt, uint8_t* buffer,
                                                         uint64_t buffer_bytes, uint64_t stride) {
  auto m = std::make_unique<Impl>();
  auto log = base::logger("expertd");
  if (opt.queue_depth < 1 || opt.queue_depth > 4096)
    return absl::InvalidArgumentError("queue depth must be in [1, 4096]");
  // O_DIRECT where allowed (tmpfs refuses it). Mixed modes would need
  // per-file alignment rules: buffered for all when one file refuses.
  size_t direct_ok = 0;
  if (opt.direct) {
    for (const std::string& p : files) {
      auto f = base::File::open_read(p, O_DIRECT);
      if (!f.ok()) break;
      m->files.push_back(std::move(*f));
      ++direct_ok;
    }
  }
  m->direct = opt.direct && direct_ok == files.size();
  if (!m->direct) {
    if (opt.direct)
      log->warn("O_DIRECT refused for {} of {} shard files (tmpfs?): using buffered reads",
                files.size() - direct_ok, files.size());
    m->files.clear();
    for (const std::string& p : files) {
      K3_ASSIGN_OR_RETURN(base::File f, base::File::open_read(p));
      m->files.push_back(std::move(f));
    }
  }
  const unsigned entries = static_cast<unsigned>(std::max(8, opt.queue_depth * 2));
  if (int r = io_uring_queue_init(entries, &m->ring, 0); r < 0)
    return absl::UnavailableError(cat("io_uring_queue_init failed: ", std::strerror(-r)));
  m->ring_ok = true;
  std::vector<int> fds;
  for (const base::File& f : m->files) fds.push_back(f.fd());
  if (int r = io_uring_register_files(&m->ring, fds.data(), static_cast<unsigned>(fds.size()));
      r < 0)
    return absl::UnavailableError(cat("io_uring_register_files failed: ", std::strerror(-r)));
  m->buffer = buffer;
  m->piece = stride > 0 ? (kRegisteredPiece / stride) * stride : 0;
  std::vector<iovec> iov;
  for (uint64_t off = 0; m->piece > 0 && off < buffer_bytes; off += m->piece)
    iov.push_back({buffer + off, static_cast<size_t>(std::min(m->piece, buffer_bytes - off))});
  const int r =
      m->piece > 0 && !iov.empty()
          ? io_uring_register_buffers(&m->ring, iov.data(), static_cast<unsigned>(iov.size()))
          : -EINVAL;
  m->fixed = r == 0;
  if (r != 0) log->warn("io_uring_register_buffers failed ({}): plain reads", std::strerror(-r));
  return std::unique_ptr<UringReader>(new UringReader(std::move(m)));
}

bool UringReader::direct() const {
  return impl_->direct;
}
bool UringReader::fixed_buffers() const {
  return impl_->fixed;
}

bool UringReader::queue(uint32_t file, uint64_t offset, uint8_t* dst, uint32_t len, uint64_t user) {
  Impl& m = *impl_;
  io_uring_sqe* sqe = io_uring_get_sqe(&m.ring);
  if (sqe == nullptr) return false;
  if (m.fixed) {
    const uint64_t rel = static_cast<uint64_t>(dst - m.buffer);
    io_uring_prep_read_fixed(sqe, static_cast<int>(file), dst, len, offset,
                             static_cast<int>(rel / m.piece));
  } else {
    io_uring_prep_read(sqe, static_cast<int>(file), dst, len, offset);
  }
  sqe->flags |= IOSQE_FIXED_FILE;
  // A buffered read of cached pages is a copy, done inline by the submitting
  // thread: one core copies every queued chunk before submit returns and
  // before any completion is seen. Punted to io_uring's workers, the copies
  // run on every core and complete one by one.
  if (!m.direct) sqe->flags |= IOSQE_ASYNC;
  io_uring_sqe_set_data64(sqe, user);
  return true;
}

void UringReader::submit() {
  io_uring_submit(&impl_->ring);
}

bool UringReader::wait(int timeout_ms) {
  io_uring_cqe* cqe = nullptr;
  __kernel_timespec ts{timeout_ms / 1000, static_cast<long long>(timeout_ms % 1000) * 1000000};
  const int r = io_uring_wait_cqe_timeout(&impl_->ring, &cqe, &ts);
  if (r < 0 && r != -ETIME && r != -EINTR) {
    base::logger("expertd")->error("io_uring wait failed: {}", std::strerror(-r));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return r == 0;
}

size_t UringReader::drain(const std::function<void(uint64_t, int)>& fn) {
  Impl& m = *impl_;
  io_uring_cqe* cqe = nullptr;
  unsigned head;
  size_t seen = 0;
  io_uring_for_each_cqe(&m.ring, head, cqe) {
    ++seen;
    fn(io_uring_cqe_get_data64(cqe), cqe->res);
  }
  io_uring_cq_advance(&m.ring, static_cast<unsigned>(seen));
  return seen;
}

}  // namespace k3::expertd
