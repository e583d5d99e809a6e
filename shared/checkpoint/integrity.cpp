#include "shared/checkpoint/integrity.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "shared/checkpoint/model_tensors.h"

namespace k3::checkpoint {
namespace {

constexpr uint64_t kAlign = 4096;
constexpr uint64_t kBufBytes = 8ull << 20;

std::string logical_name(const Checkpoint& ck, const std::string& stored) {
  const std::string& p = ck.prefix();
  return stored.compare(0, p.size(), p) == 0 ? stored.substr(p.size()) : stored;
}

uint64_t first_offset(const IntegrityItem& it) {
  return it.spans.empty() ? 0 : it.spans.front().offset;
}

}  // namespace

StatusOr<std::vector<IntegrityItem>> integrity_plan(const Checkpoint& ck) {
  K3_ASSIGN_OR_RETURN(ModelConfig c, load_model_config(ck.model_dir()));
  std::vector<IntegrityItem> items;
  std::set<std::string> expert_tensor_names;
  for (int64_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l) {
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::vector<ExpectedTensor> six = expert_tensors(c, l, e);
      IntegrityItem it;
      int present = 0;
      for (const ExpectedTensor& t : six) {
        expert_tensor_names.insert(t.name);
        const TensorInfo* ti = ck.find(t.name);
        if (ti == nullptr) continue;
        ++present;
        FileSpan s{ti->file, ti->offset, ti->nbytes};
        if (!it.spans.empty() && it.spans.back().file == s.file &&
            it.spans.back().offset + it.spans.back().length == s.offset)
          it.spans.back().length += s.length;  // contiguous: one read
        else
          it.spans.push_back(s);
        it.entry.bytes += ti->nbytes;
      }
      if (present == 0) continue;  // not held here
      if (present != static_cast<int>(six.size()))
        return absl::InvalidArgumentError(cat(ck.model_dir(), ": expert ", e, " of layer ", l,
                                              " has ", present, " of its ", six.size(),
                                              " tensors"));
      it.entry.kind = ManifestEntry::Kind::kExpert;
      it.entry.name = tensor_names::moe(l, cat("experts.", e));
      it.entry.layer = l;
      it.entry.id = e;
      items.push_back(std::move(it));
    }
  }
  for (const TensorInfo& t : ck.tensors()) {
    const std::string name = logical_name(ck, t.name);
    if (expert_tensor_names.count(name)) continue;
    IntegrityItem it;
    it.entry.kind = ManifestEntry::Kind::kTensor;
    it.entry.name = name;
    it.entry.dtype = std::string(dtype_name(t.dtype));
    it.entry.shape = t.shape;
    it.entry.bytes = t.nbytes;
    if (t.nbytes) it.spans.push_back({t.file, t.offset, t.nbytes});
    items.push_back(std::move(it));
  }
  std::stable_sort(items.begin(), items.end(), [](const IntegrityItem& a, const IntegrityItem& b) {
    const uint32_t fa = a.spans.empty() ? 0 : a.spans.front().file;
    const uint32_t fb = b.spans.empty() ? 0 : b.spans.front().file;
    return fa != fb ? fa < fb : first_offset(a) < first_offset(b);
  });
  return items;
}

struct SpanHasher::Impl {
  const Checkpoint* ck = nullptr;
  std::vector<int> fds;  // O_DIRECT fd per file, or -1 (use the checkpoint's buffered fd)
  uint8_t* buf = nullptr;
  bool all_direct = true;
  ~Impl() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
    std::free(buf);
  }
};

SpanHasher::SpanHasher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SpanHasher::~SpanHasher() = default;

bool SpanHasher::direct() const {
  return impl_->all_direct;
}

StatusOr<std::unique_ptr<SpanHasher>> SpanHasher::create(const Checkpoint& ck, bool direct) {
  auto impl = std::make_unique<Impl>();
  impl->ck = &ck;
  if (posix_memalign(reinterpret_cast<void**>(&impl->buf), kAlign, kBufBytes) != 0)
    return absl::ResourceExhaustedError("cannot allocate the 8 MiB read buffer");
  for (const std::string& path : ck.files()) {
    int fd = direct ? ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC) : -1;
    if (fd < 0) impl->all_direct = false;  // tmpfs and some filesystems refuse O_DIRECT
    impl->fds.push_back(fd);
  }
  return std::unique_ptr<SpanHasher>(new SpanHasher(std::move(impl)));
}

Status SpanHasher::hash_span(const FileSpan& s, base::Xxh3Stream& h, void (*cb)(void*, uint64_t),
                             void* ctx) {
  const int dfd = impl_->fds[s.file];
  const std::string& path = impl_->ck->files()[s.file];
  const uint64_t end = s.offset + s.length;
  if (dfd < 0) {
    const base::File& f = impl_->ck->file(s.file);
    for (uint64_t p = s.offset; p < end;) {
      const uint64_t n = std::min(kBufBytes, end - p);
      K3_RETURN_IF_ERROR(f.pread_exact(impl_->buf, n, p));
      h.update(impl_->buf, n);
      cb(ctx, n);
      p += n;
    }
    return absl::OkStatus();
  }
  // O_DIRECT: aligned reads covering the span; hash only the span's bytes.
  for (uint64_t p = s.offset / kAlign * kAlign; p < end;) {
    const uint64_t want = std::min(kBufBytes, (end - p + kAlign - 1) / kAlign * kAlign);
    ssize_t got;
    do {
      got = ::pread(dfd, impl_->buf, want, static_cast<off_t>(p));
    } while (got < 0 && errno == EINTR);
    if (got < 0)
      return absl::DataLossError(
          cat(path, ": read error at offset ", p, " (", std::strerror(errno), ")"));
    const uint64_t lo = std::max(p, s.offset);
    const uint64_t hi = std::min(p + static_cast<uint64_t>(got), end);
    if (hi <= lo)
      return absl::DataLossError(cat(path, ": short read at offset ", lo, " (file truncated?)"));
    h.update(impl_->buf + (lo - p), hi - lo);
    cb(ctx, hi - lo);
    if (static_cast<uint64_t>(got) < want && hi < end)
      return absl::DataLossError(cat(path, ": short read at offset ", hi, " (file truncated?)"));
    p += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

Status verify_dense_tensors(const Checkpoint& ck, const Manifest& m, uint64_t* bytes_checked) {
  K3_ASSIGN_OR_RETURN(auto hasher, SpanHasher::create(ck, /*direct=*/true));
  uint64_t total = 0;
  for (const TensorInfo& t : ck.tensors()) {
    const std::string name = logical_name(ck, t.name);
    if (is_routed_expert_tensor(name)) continue;
    const std::string where = cat(ck.files()[t.file], " at offset ", t.offset);
    const ManifestEntry* want = m.tensor(name);
    if (want == nullptr)
      return absl::DataLossError(
          cat("dense tensor ", name, " (", where, ") is not in the manifest"));
    const std::string dtype(dtype_name(t.dtype));
    if (want->dtype != dtype || want->shape != t.shape || want->bytes != t.nbytes)
      return absl::DataLossError(cat("dense tensor ", name, " (", where, ") is stored as ", dtype,
                                     " with ", t.nbytes, " bytes; the manifest has ", want->dtype,
                                     " with ", want->bytes, " bytes"));
    IntegrityItem it;
    if (t.nbytes) it.spans.push_back({t.file, t.offset, t.nbytes});
    K3_ASSIGN_OR_RETURN(base::Hash128 h, hasher->hash(it, [](uint64_t) {}));
    if (!(h == want->hash))
      return absl::DataLossError(cat("dense tensor ", name, " (", where,
                                     ") fails its checksum: xxh3-128 ", h.hex(),
                                     ", the manifest has ", want->hash.hex()));
    total += t.nbytes;
  }
  if (bytes_checked != nullptr) *bytes_checked = total;
  return absl::OkStatus();
}

}  // namespace k3::checkpoint
