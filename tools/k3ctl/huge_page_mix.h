// Mixing a hugetlbfs pool's free pages before a benchmark allocates from it.
//
// The kernel hands out free huge pages in its free list's order, which is the
// order earlier runs released them in: two buffers made one after the other
// (bench io's raw-read buffer and expertd's segment) each get a run of pages
// from one part of the pool. On a virtual machine the rate at which a drive
// reads into a page can depend on where the page lies in the host's memory:
// measured here (2026-12-05), raw reads into two such buffers of one process
// differed by 9-10 %, the faster one changing from run to run, so expertd's
// frac_of_raw swung between 0.89 and 1.10 on the pages alone. Allocating the
// pages the benchmark will use in one file and giving them back one by one in
// a random order leaves the free list shuffled: each buffer made next draws
// a random mix of the same pages, and neither is favoured (the two buffers
// then read within 2 % of each other).
#pragma once

#include <cstdint>
#include <string>

#include "shared/status.h"

namespace k3::tools {

// On a hugetlbfs directory: allocates min(`bytes`, the mount's free space) of
// huge pages in a temporary file there, frees them one page at a time in the
// order a generator seeded with `seed` draws, and removes the file. Returns
// the number of pages mixed: 0 where `dir` is not hugetlbfs (nothing done).
// An error names the step that failed; the file is removed either way.
StatusOr<int64_t> mix_free_huge_pages(const std::string& dir, uint64_t bytes, uint64_t seed);

}  // namespace k3::tools
