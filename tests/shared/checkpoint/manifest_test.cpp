#include "shared/checkpoint/manifest.h"

#include <gtest/gtest.h>

namespace k3 {
namespace {

std::string sample() {
  ManifestEntry t;
  t.kind = ManifestEntry::Kind::kTensor;
  t.name = "model.norm.weight";
  t.dtype = "BF16";
  t.shape = {512};
  t.bytes = 1024;
  t.hash = xxh3_128("a", 1);
  ManifestEntry e;
  e.kind = ManifestEntry::Kind::kExpert;
  e.name = "model.layers.3.block_sparse_moe.experts.7";
  e.layer = 3;
  e.id = 7;
  e.bytes = 4096;
  e.hash = xxh3_128("b", 1);
  return manifest_header_line({0x1234abcdull, 2}) + "\n" + manifest_entry_line(t) + "\n" +
         manifest_entry_line(e) + "\n";
}

TEST(Manifest, RoundTrips) {
  auto m = Manifest::parse(sample(), "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->header().fingerprint, 0x1234abcdull);
  ASSERT_NE(m->tensor("model.norm.weight"), nullptr);
  EXPECT_EQ(m->tensor("model.norm.weight")->shape, std::vector<int64_t>{512});
  ASSERT_NE(m->expert(3, 7), nullptr);
  EXPECT_EQ(m->expert(3, 7)->hash, xxh3_128("b", 1));
  EXPECT_EQ(m->expert(3, 6), nullptr);
}

// Untrusted input: each defect refused with its line.
TEST(Manifest, RefusesBadFiles) {
  const std::string good = sample();
  const std::string header = good.substr(0, good.find('\n') + 1);
  const std::string line2 =
      good.substr(header.size(), good.find('\n', header.size()) + 1 - header.size());
  struct Case {
    std::string text, error;
  };
  const std::vector<Case> cases = {
      {"", "m: empty manifest"},
      {good.substr(0, good.size() - 1), "m:3: the last line does not end in a newline"},
      {header + line2, "m: the header announces 2 entries, the file holds 1"},
      {header + line2 + line2, "m:3: a second entry for model.norm.weight"},
      {"{\"k3_manifest\":2}\n", "m:1: not a k3 manifest header"},
      {"[1]\n", "m:1: not a JSON object"},
      {header +
           "{\"tensor\":\"x\",\"dtype\":\"BF16\",\"shape\":[1],\"bytes\":2,\"xxh3_128\":\"zz\"}\n",
       "m:2: \"xxh3_128\" must be 32 hex digits"},
      {header + "{\"expert\":\"x\",\"layer\":-1,\"id\":0,\"bytes\":2,\"xxh3_128\":\"" +
           std::string(32, '0') + "\"}\n",
       "m:2: \"layer\" must be a non-negative integer"},
      {header + "{\"tensor\":\"x\",\"dtype\":\"BF16\",\"shape\":[1],\"bytes\":2,\"xxh3_128\":\"" +
           std::string(32, '0') + "\",\"extra\":1}\n",
       "m:2: unknown field \"extra\""},
      {header + "{\"neither\":1}\n", "m:2: neither a \"tensor\" nor an \"expert\" entry"},
  };
  for (const Case& c : cases) {
    auto m = Manifest::parse(c.text, "m");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_NE(std::string(m.status().message()).find(c.error), std::string::npos)
        << m.status() << " (wanted: " << c.error << ")";
  }
}

}  // namespace
}  // namespace k3
