// k3container.json is untrusted input: every malformed form is refused with
// the file and the field named, never a crash.
#include "shared/checkpoint/container.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace k3 {
namespace {

using testing::TempDir;

TEST(ContainerInfo, RoundTripsAndRefusesMalformedFiles) {
  TempDir tmp;
  auto none = read_container_info(tmp.path());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  ContainerInfo info;
  info.dense_bits = 8;
  info.mla_bits = 32;
  info.head_bits = 4;
  info.dense_only = true;
  info.shards = 1;
  info.fingerprint = 0x0123456789abcdefull;
  testing::write_file(tmp.file(kContainerFile), info.to_json());
  auto back = read_container_info(tmp.path());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->has_value());
  EXPECT_TRUE(**back == info);
  EXPECT_EQ((*back)->bits_for(QuantGroup::kMla), 32);
  EXPECT_EQ((*back)->bits_for(QuantGroup::kNone), 32);

  const std::string path = tmp.file(kContainerFile);
  for (const auto& [text, what] : std::vector<std::pair<std::string, std::string>>{
           {"not json", "not a JSON object"},
           {"[1]", "not a JSON object"},
           {R"({"format": 5})", "format is not k3serve-container"},
           {R"({"format": "k3serve-container", "version": 2})",
            "unsupported version (this build reads version 1)"},
           {R"({"format": "k3serve-container", "version": 1, "dense_bits": 6})",
            "dense_bits must be 4, 8 or 32"},
           {R"({"format": "k3serve-container", "version": 1, "dense_bits": 4, "mla_bits": 8,
                "head_bits": 8, "dense_only": false, "shards": 0})",
            "shards must be a positive integer"},
           {R"({"format": "k3serve-container", "version": 1, "dense_bits": 4, "mla_bits": 8,
                "head_bits": 8, "dense_only": false, "shards": 2, "fingerprint": 7})",
            "fingerprint must be 16 lower-case hex digits"},
       }) {
    testing::write_file(path, text);
    auto r = read_container_info(tmp.path());
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message(), path + ": " + what) << text;
  }
}

}  // namespace
}  // namespace k3
