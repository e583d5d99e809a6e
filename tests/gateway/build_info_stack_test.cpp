// The gateway's view of every daemon's build and health (issue 27):
// k3_build_info on /metrics for the gateway, engined and each expertd; the
// expertd health log lines ("is down", "is back") only on a real change
// (that a start with the expertd up says neither: tests/deploy/run_local_test.sh).
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
  // The gateway's log from `from` on.
  auto gateway_log = [&](size_t from) {
    const std::string all = s.logs();
    const std::string g = all.substr(0, all.find("--- engined.log"));
    return from < g.size() ? g.substr(from) : std::string();
  };
  // Ready: the expertd is up (whether the gateway's first poll came before it
  // started, which logs it down and then back, depends on the start order).
  // While it stays up, nothing more is said about it.
  const size_t ready = gateway_log(0).size();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // five polls
  EXPECT_EQ(gateway_log(ready).find("expertd d0 is"), std::string::npos) << gateway_log(ready);
  // A stopped expertd misses its Health deadline: down; continued: back.
  ::kill(s.expertd(0).pid(), SIGSTOP);
  auto since_ready = [&] { return gateway_log(ready); };
  EXPECT_TRUE(wait_for_text(since_ready, "expertd d0 is down", 60)) << since_ready();
  ::kill(s.expertd(0).pid(), SIGCONT);
  EXPECT_TRUE(wait_for_text(since_ready, "expertd d0 is back", 60)) << since_ready();
  const std::string log = since_ready();
  EXPECT_LT(log.find("expertd d0 is down"), log.find("expertd d0 is back"));
}

}  // namespace
}  // namespace k3::testing
