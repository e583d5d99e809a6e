// gateway/core/config.h: limits that cannot work refused naming the flag
// (listen addresses: tests/shared/base/host_port_test.cpp).
#include "gateway/core/config.h"

#include <gtest/gtest.h>

namespace k3::gateway {
namespace {

TEST(Config, RefusesLimitsThatCannotWork) {
  auto check = [](auto change, std::string_view needle) {
    GatewayConfig c;
    c.model_dir = "/m";
    change(c);
    const Status s = c.validate();
    EXPECT_FALSE(s.ok()) << needle;
    EXPECT_NE(msg(s).find(needle), std::string::npos) << msg(s);
  };
  check([](GatewayConfig& c) { c.http_threads = 64; }, "--http-threads (64) must be more than");
  check([](GatewayConfig& c) { c.max_header_bytes = 10; }, "--max-header-bytes");
  check([](GatewayConfig& c) { c.header_timeout_s = 0; }, "--header-timeout-s");
  check([](GatewayConfig& c) { c.max_connections = 0; }, "--max-connections");
  check([](GatewayConfig& c) { c.tls_cert = "c.pem"; }, "--tls-cert and --tls-key go together");
  check([](GatewayConfig& c) { c.cors_origin = "a\r\nSet-Cookie: x"; }, "--cors-origin");
  GatewayConfig ok;
  ok.model_dir = "/m";
  EXPECT_TRUE(ok.validate().ok());
}

}  // namespace
}  // namespace k3::gateway
