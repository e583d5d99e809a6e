#include "shared/base/hash.h"

#include <gtest/gtest.h>

#include <string>

#include "shared/base/progress.h"

namespace k3 {
namespace {

// Published test vectors: XXH3-128 of the empty input (xxHash's own tests)
// and SHA-256 of "abc" (FIPS 180-2).
TEST(Hash, KnownValues) {
  EXPECT_EQ(base::xxh3_128("", 0).hex(), "99aa06d3014798d86001c324468d497f");
  base::Sha256Stream s;
  s.update("abc", 3);
  EXPECT_EQ(s.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Hash, StreamsEqualOneShot) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(static_cast<char>(i * 131 + (i >> 7)));
  base::Xxh3Stream x;
  for (size_t p = 0; p < data.size(); p += 4093)
    x.update(data.data() + p, std::min<size_t>(4093, data.size() - p));
  EXPECT_EQ(x.digest(), base::xxh3_128(data.data(), data.size()));
  data[777] ^= 1;
  EXPECT_NE(x.digest(), base::xxh3_128(data.data(), data.size()));
}

TEST(Hash, HexRoundTripAndRefusals) {
  const base::Hash128 h = base::xxh3_128("k3", 2);
  EXPECT_EQ(base::Hash128::from_hex(h.hex()), h);
  EXPECT_FALSE(base::Hash128::from_hex(h.hex().substr(1)));
  EXPECT_FALSE(base::Hash128::from_hex(std::string(31, '0') + "g"));
  EXPECT_EQ(base::Hash128::from_hex(std::string(32, 'F'))->hi, ~0ull);
}

TEST(Progress, FormatsTheEta) {
  EXPECT_EQ(base::Progress::format_seconds(0), "0s");
  EXPECT_EQ(base::Progress::format_seconds(59.4), "59s");
  EXPECT_EQ(base::Progress::format_seconds(65), "1m05s");
  EXPECT_EQ(base::Progress::format_seconds(3 * 3600 + 120), "3h02m");
  EXPECT_EQ(base::Progress::format_seconds(-1), "?");
}

}  // namespace
}  // namespace k3
