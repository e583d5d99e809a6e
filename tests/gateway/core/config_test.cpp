// gateway/core/config.h: limits that cannot work refused naming the flag
// (listen addresses: tests/shared/base/host_port_test.cpp).
#include "gateway/core/config.h"

#include <gtest/gtest.h>

#include "shared/base/cli_help.h"
#include "shared/base/config_file.h"
#include "tests/test_util.h"

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
  check([](GatewayConfig& c) { c.request_timeout_s = -1; }, "--request-timeout-s -1 must be 0");
  check([](GatewayConfig& c) { c.progress_timeout_s = -2; }, "--progress-timeout-s -2 must be 0");
  check([](GatewayConfig& c) { c.progress_interval_s = 0; }, "progress_interval_s");
  GatewayConfig ok;
  ok.model_dir = "/m";
  EXPECT_TRUE(ok.validate().ok());
}

// No total deadline by default (0, valid), a 300 s progress timeout; both
// in --help with their defaults and settable from the config file.
TEST(Config, TimeoutDefaultsHelpAndConfigFile) {
  GatewayConfig d;
  EXPECT_EQ(d.request_timeout_s, 0);
  EXPECT_EQ(d.progress_timeout_s, 300);
  EXPECT_EQ(d.progress_interval_s, 5);
  d.model_dir = "/m";
  EXPECT_TRUE(d.validate().ok());

  CLI::App app;
  base::use_k3_help_format(app);
  GatewayConfig c;
  c.add_flags(app);
  const std::string help = app.help();
  auto line = [&](const std::string& flag) {
    const size_t at = help.find(flag);
    EXPECT_NE(at, std::string::npos) << help;
    if (at == std::string::npos) return std::string();
    // An option's description may wrap: up to the next option.
    const size_t next = help.find("\n  --", at);
    return help.substr(at, next == std::string::npos ? std::string::npos : next - at);
  };
  EXPECT_NE(line("--request-timeout-s").find("(default: 0)"), std::string::npos)
      << line("--request-timeout-s");
  EXPECT_NE(line("--progress-timeout-s").find("(default: 300)"), std::string::npos)
      << line("--progress-timeout-s");

  testing::TempDir tmp;
  testing::write_file(tmp.file("gateway.json"),
                      R"({"model": "/m", "request_timeout_s": 0, "progress_timeout_s": 60})");
  std::vector<std::string> args = {"gateway", "--request-timeout-s", "5", "--config",
                                   tmp.file("gateway.json")};
  auto expanded = base::expand_config_file(args, 1, {}, [&](const std::string& name) {
    return app.get_option_no_throw("--" + name) != nullptr;
  });
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  auto argv = base::to_argv(*expanded);
  try {
    app.parse(static_cast<int>(expanded->size()), argv.data());
  } catch (const CLI::ParseError& e) {
    std::string line;
    for (const std::string& a : *expanded) line += a + " ";
    FAIL() << e.what() << " parsing " << line;
  }
  EXPECT_EQ(c.request_timeout_s, 5);  // the command line wins over the file
  EXPECT_EQ(c.progress_timeout_s, 60);
  EXPECT_TRUE(c.validate().ok());
}

// --served-model-name is repeatable (aliases), --model-name its old
// spelling, both from a config file; the default is kimi-k3 for a K3
// checkpoint.
TEST(Config, ServedModelNamesAliasesAndDefault) {
  auto parse = [](std::vector<std::string> args, const std::string& file_text) {
    CLI::App app;
    GatewayConfig c;
    c.add_flags(app);
    testing::TempDir tmp;
    if (!file_text.empty()) {
      testing::write_file(tmp.file("gateway.json"), file_text);
      args.insert(args.end(), {"--config", tmp.file("gateway.json")});
    }
    args.insert(args.begin(), "gateway");
    auto expanded = base::expand_config_file(args, 1, {}, [&](const std::string& name) {
      return app.get_option_no_throw("--" + name) != nullptr;
    });
    EXPECT_TRUE(expanded.ok()) << expanded.status();
    auto argv = base::to_argv(*expanded);
    app.parse(static_cast<int>(expanded->size()), argv.data());
    EXPECT_TRUE(c.validate().ok());
    return c;
  };
  const std::string tiny = testing::tiny_model_dir();
  GatewayConfig d = parse({"--model", tiny}, "");
  EXPECT_EQ(d.served_model_names, std::vector<std::string>{"kimi-k3"});
  EXPECT_EQ(d.model_name, "kimi-k3");
  GatewayConfig two = parse({"--model", tiny, "--served-model-name", "k3", "--model-name", "kimi",
                             "--served-model-name", "k3"},
                            "");
  EXPECT_EQ(two.served_model_names, (std::vector<std::string>{"k3", "kimi"}));
  EXPECT_EQ(two.model_name, "k3");
  GatewayConfig file = parse({"--model", tiny}, R"({"served-model-name": ["a", "b"]})");
  EXPECT_EQ(file.served_model_names, (std::vector<std::string>{"a", "b"}));
  GatewayConfig old_key = parse({"--model", tiny}, R"({"model_name": "legacy"})");
  EXPECT_EQ(old_key.served_model_names, std::vector<std::string>{"legacy"});

  GatewayConfig empty;
  empty.model_dir = tiny;
  empty.served_model_names = {""};
  EXPECT_NE(msg(empty.validate()).find("--served-model-name"), std::string::npos);
}

}  // namespace
}  // namespace k3::gateway
