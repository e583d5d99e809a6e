// The drive ceiling's read loop (tools/k3ctl/drive_ceiling.h) on a real file
// through a real io_uring: the caller's destinations each take their turn,
// and the bytes that land are the file's.
#include "tools/k3ctl/drive_ceiling.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace k3::tools {
namespace {

constexpr uint64_t kChunk = 64 << 10;
constexpr int kFileChunks = 16;

// A file of kFileChunks chunks, chunk i filled with the byte i + 1.
struct ChunkFile {
  std::string path;
  ChunkFile() {
    path =
        (std::filesystem::temp_directory_path() / ("k3test-ceiling-" + std::to_string(::getpid())))
            .string();
    std::ofstream f(path, std::ios::binary);
    std::vector<char> c(kChunk);
    for (int i = 0; i < kFileChunks; ++i) {
      std::memset(c.data(), i + 1, c.size());
      f.write(c.data(), static_cast<std::streamsize>(c.size()));
    }
  }
  ~ChunkFile() { std::filesystem::remove(path); }
};

struct Aligned {
  void operator()(uint8_t* p) const { std::free(p); }
};

TEST(DriveCeiling, EveryDestinationTakesItsTurn) {
  ChunkFile file;
  constexpr int kDests = 8;
  std::unique_ptr<uint8_t, Aligned> buf(
      static_cast<uint8_t*>(std::aligned_alloc(4096, kDests * kChunk)));
  std::memset(buf.get(), 0xee, kDests * kChunk);
  std::vector<uint8_t*> dests;
  for (int i = 0; i < kDests; ++i) dests.push_back(buf.get() + i * kChunk);
  int next_chunk = 0;
  auto next = [&] {
    const ReadChunk r{0, static_cast<uint64_t>(next_chunk) * kChunk, kChunk};
    next_chunk = (next_chunk + 1) % kFileChunks;
    return r;
  };
  // Buffered reads: every filesystem takes them; queue depth 2 of 8.
  auto g = uring_read_gbps({file.path}, next, /*qd=*/2, kChunk, 0.2, /*direct=*/false, dests);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_GT(*g, 0);
  for (int i = 0; i < kDests; ++i) {
    const uint8_t* d = dests[i];
    // A whole chunk of the file landed here: one byte value, 1 .. 16.
    EXPECT_GE(d[0], 1) << "destination " << i << " never written";
    EXPECT_LE(d[0], kFileChunks) << "destination " << i << " never written";
    EXPECT_EQ(std::memcmp(d, d + 1, kChunk - 1), 0) << "destination " << i << " holds one chunk";
  }
}

TEST(DriveCeiling, FewerDestinationsThanTheQueueDepthAreRefused) {
  ChunkFile file;
  std::unique_ptr<uint8_t, Aligned> buf(static_cast<uint8_t*>(std::aligned_alloc(4096, kChunk)));
  std::memset(buf.get(), 0xee, kChunk);
  int n = 0;
  auto next = [&] {
    return ReadChunk{0, static_cast<uint64_t>(n++ % kFileChunks) * kChunk, kChunk};
  };
  auto g = uring_read_gbps({file.path}, next, /*qd=*/4, kChunk, 0.1, /*direct=*/false, {buf.get()});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
  EXPECT_NE(std::string(g.status().message()).find("queue depth 4"), std::string::npos)
      << g.status();
  EXPECT_EQ(n, 0) << "nothing read";
  EXPECT_EQ(buf.get()[0], 0xee);
  EXPECT_EQ(buf.get()[kChunk - 1], 0xee);
}

}  // namespace
}  // namespace k3::tools
