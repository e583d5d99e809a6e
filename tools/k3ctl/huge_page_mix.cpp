#include "tools/k3ctl/huge_page_mix.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <vector>

#include "shared/base/file.h"

namespace k3::tools {

namespace {

// Removes the file when the scope ends (an error included).
struct RemoveFile {
  std::string path;
  ~RemoveFile() { ::unlink(path.c_str()); }
};

}  // namespace

StatusOr<int64_t> mix_free_huge_pages(const std::string& dir, uint64_t bytes, uint64_t seed) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0)
    return absl::FailedPreconditionError(cat("cannot stat ", dir, ": ", std::strerror(errno)));
  if (fs.f_type != HUGETLBFS_MAGIC || fs.f_bsize <= 0) return 0;
  const uint64_t page = static_cast<uint64_t>(fs.f_bsize);
  // A mount without a size limit counts no blocks: the pool's free pages
  // of that size then bound it.
  uint64_t free_pages = static_cast<uint64_t>(fs.f_bfree);
  if (fs.f_blocks == 0) {
    std::ifstream in(cat("/sys/kernel/mm/hugepages/hugepages-", page / 1024, "kB/free_hugepages"));
    if (!(in >> free_pages)) free_pages = 0;
  }
  const int64_t pages =
      static_cast<int64_t>(std::min<uint64_t>((bytes + page - 1) / page, free_pages));
  if (pages == 0) return 0;

  const std::string path = cat(dir, "/k3-page-mix-", ::getpid());
  ::unlink(path.c_str());  // a stale one of a killed run of this pid
  auto file = base::File::create(path, 0600);
  if (!file.ok()) return file.status();
  RemoveFile remove{path};
  if (::fallocate(file->fd(), 0, 0, static_cast<off_t>(pages * page)) != 0)
    return absl::ResourceExhaustedError(
        cat("cannot allocate ", pages, " huge pages in ", path, ": ", std::strerror(errno)));
  std::vector<int64_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  for (int64_t i : order)
    if (::fallocate(file->fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(i * page), static_cast<off_t>(page)) != 0)
      return absl::InternalError(
          cat("cannot free huge page ", i, " of ", path, ": ", std::strerror(errno)));
  return pages;
}

}  // namespace k3::tools
