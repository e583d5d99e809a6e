// The io_uring reader over real files: registered files and buffers, reads
// landing where asked, errors reported as results.
#include "expertd/uring_reader.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <map>

#include "shared/shm/read_span.h"
#include "tests/test_util.h"

namespace k3::expertd {
namespace {

TEST(UringReader, ReadsSpansIntoTheRegisteredBuffer) {
  testing::TempDir tmp;
  std::string a(3 * 4096 + 100, '\0'), b(5000, '\0');
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<char>(i * 7 + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(i * 13 + 5);
  testing::write_file(tmp.file("a"), a);
  testing::write_file(tmp.file("b"), b);
  const uint64_t stride = shm::expert_slot_stride(4096);
  void* p = nullptr;
  ASSERT_EQ(posix_memalign(&p, 4096, 2 * stride), 0);
  std::unique_ptr<uint8_t, decltype(&free)> buf(static_cast<uint8_t*>(p), &free);
  ReaderOptions ro;
  ro.queue_depth = 4;
  auto r = UringReader::open({tmp.file("a"), tmp.file("b")}, ro, buf.get(), 2 * stride, stride);
  ASSERT_TRUE(r.ok()) << r.status();
  // 4096 bytes of file a at 5000 (spans two blocks when direct); all of b.
  const shm::ReadSpan sa = shm::expert_read_span(5000, 4096, (*r)->direct());
  const shm::ReadSpan sb = shm::expert_read_span(0, 5000, (*r)->direct());
  ASSERT_LE(sa.length, stride);
  ASSERT_TRUE((*r)->queue(0, sa.file_offset, buf.get(), static_cast<uint32_t>(sa.length), 11));
  ASSERT_TRUE(
      (*r)->queue(1, sb.file_offset, buf.get() + stride, static_cast<uint32_t>(sb.length), 22));
  (*r)->submit();
  std::map<uint64_t, int> got;
  for (int i = 0; i < 50 && got.size() < 2; ++i)
    if ((*r)->wait(100)) (*r)->drain([&](uint64_t user, int res) { got[user] = res; });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_GE(got[11], static_cast<int>(sa.needed));
  EXPECT_GE(got[22], static_cast<int>(sb.needed));
  EXPECT_EQ(std::memcmp(buf.get() + sa.lead, a.data() + 5000, 4096), 0);
  EXPECT_EQ(std::memcmp(buf.get() + stride + sb.lead, b.data(), 5000), 0);
}

TEST(UringReader, RefusesAMissingFileAndABadQueueDepth) {
  testing::TempDir tmp;
  std::vector<uint8_t> buf(8192);
  auto r = UringReader::open({tmp.file("nope")}, {}, buf.data(), buf.size(), 8192);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("nope"), std::string::npos) << r.status();
  testing::write_file(tmp.file("x"), "x");
  ReaderOptions ro;
  ro.queue_depth = 0;
  EXPECT_EQ(UringReader::open({tmp.file("x")}, ro, buf.data(), buf.size(), 8192).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace k3::expertd
