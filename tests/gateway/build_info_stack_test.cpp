// The gateway's view of every daemon's build and health (issue 27):
// k3_build_info on /metrics for the gateway, engined and each expertd; the
// expertd health log lines ("is down", "is back") only on a real change.
#include <gtest/gtest.h>
#include <signal.h>

#include <functional>
#include <thread>

#include "shared/base/version.h"
#include "tests/gateway/stack_fixture.h"

namespace k3::testing {
namespace {

// Calls `read` until what it returns contains `part` (true) or `seconds` pass.
bool wait_for_text(const std::function<std::string()>& read, const std::string& part,
                   double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (read().find(part) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(Stack, MetricsStateEveryComponentsBuild) {
  Stack s(StackOptions{});
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  const std::string labels =
      std::string("version=\"") + base::version() + "\",commit=\"" + base::git_commit() + "\"} 1";
  auto metrics = [&] {
    auto r = s.client().Get("/metrics");
    return r ? r->body : std::string();
  };
  EXPECT_TRUE(wait_for_text(metrics, "k3_build_info{component=\"expertd/d0\"," + labels, 30))
      << metrics();
  const std::string m = metrics();
  EXPECT_NE(m.find("# TYPE k3_build_info gauge"), std::string::npos) << m;
  EXPECT_NE(m.find("k3_build_info{component=\"gateway\"," + labels), std::string::npos) << m;
  EXPECT_NE(m.find("k3_build_info{component=\"engined\"," + labels), std::string::npos) << m;
}

TEST(Stack, LogsAnExpertdBackOnlyAfterItWasDown) {
  Stack s(StackOptions{});
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  auto gateway_log = [&] { return s.logs().substr(0, s.logs().find("--- engined.log")); };
  // Up from the first poll: neither "down" nor "back".
  std::this_thread::sleep_for(std::chrono::seconds(1));  // five polls
  EXPECT_EQ(gateway_log().find("expertd d0 is"), std::string::npos) << gateway_log();
  // A stopped expertd misses its Health deadline: down; continued: back.
  ::kill(s.expertd(0).pid(), SIGSTOP);
  EXPECT_TRUE(wait_for_text(gateway_log, "expertd d0 is down", 60)) << gateway_log();
  ::kill(s.expertd(0).pid(), SIGCONT);
  EXPECT_TRUE(wait_for_text(gateway_log, "expertd d0 is back", 60)) << gateway_log();
  const std::string log = gateway_log();
  EXPECT_LT(log.find("expertd d0 is down"), log.find("expertd d0 is back"));
}

}  // namespace
}  // namespace k3::testing
