#include "shared/base/malloc_policy.h"

#include <malloc.h>

namespace k3::base {

void keep_freed_memory_for_reuse() {
  // 32 MiB is glibc's largest mmap threshold on 64-bit; setting it also
  // turns off its dynamic adjustment.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace k3::base
