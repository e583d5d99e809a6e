// HOST:PORT as every flag and file names a TCP address (shared/base/host_port.h).
#include "shared/base/host_port.h"

#include <gtest/gtest.h>

namespace k3 {
namespace {

TEST(HostPort, SplitsHostAndPort) {
  auto a = base::parse_host_port("127.0.0.1:8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8080);
  auto b = base::parse_host_port("[::1]:0");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 0);
  for (const char* bad : {"8080", "host:", ":80", "h:70000", "h:8x", "unix:/run/x.sock", "h:-1",
                          "h:+80", "h: 80", "h:123456"})
    EXPECT_FALSE(base::parse_host_port(bad).ok()) << bad;
}

TEST(HostPort, AMinimumPortAndMessagesNamingTheAddress) {
  EXPECT_TRUE(base::parse_host_port("h:1", 1).ok());
  EXPECT_EQ(msg(base::parse_host_port("h:0", 1).status()), "'h:0': port must be 1..65535");
  EXPECT_EQ(msg(base::parse_host_port("nohost").status()), "'nohost' is not HOST:PORT");
  EXPECT_EQ(base::with_port("127.0.0.1:0", 4711), "127.0.0.1:4711");
  EXPECT_EQ(base::with_port("[::1]:0", 4711), "[::1]:4711");
}

}  // namespace
}  // namespace k3
