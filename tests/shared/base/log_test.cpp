#include "shared/base/log.h"
#include "shared/base/log_format.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/test_util.h"

namespace k3::base {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::system_clock;

// Sets TZ for one test (localtime_r reads it after tzset()).
struct WithTz {
  explicit WithTz(const char* tz) {
    ::setenv("TZ", tz, 1);
    ::tzset();
  }
  ~WithTz() {
    ::unsetenv("TZ");
    ::tzset();
  }
};

// 2026-12-03T16:10:53.123Z
Clock::time_point example_time() {
  return Clock::from_time_t(1796314253) + std::chrono::milliseconds(123);
}

TEST(Log, Rfc3339TimesCarryTheUtcOffset) {
  {
    WithTz tz("UTC0");
    EXPECT_EQ(rfc3339_local(example_time()), "2026-12-03T16:10:53.123+00:00");
  }
  {
    WithTz tz("CET-1");
    EXPECT_EQ(rfc3339_local(example_time()), "2026-12-03T17:10:53.123+01:00");
  }
  {
    WithTz tz("<-0330>3:30");
    EXPECT_EQ(rfc3339_local(example_time()), "2026-12-03T12:40:53.123-03:30");
  }
}

TEST(Log, JsonLineHasTimeLevelDaemonMessageAndRequestId) {
  WithTz tz("UTC0");
  const std::string line = json_log_line(example_time(), spdlog::level::info, "gateway", "gateway",
                                         "[chatcmpl-7f3a] done: prompt 12, generated 5");
  const json j = json::parse(line);
  EXPECT_EQ(j["time"], "2026-12-03T16:10:53.123+00:00");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["daemon"], "gateway");
  EXPECT_EQ(j["message"], "done: prompt 12, generated 5");
  EXPECT_EQ(j["request_id"], "chatcmpl-7f3a");
  EXPECT_FALSE(j.contains("component"));
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // The keys in a reader's order.
  EXPECT_EQ(line.rfind("{\"time\":", 0), 0u) << line;
}

TEST(Log, JsonLineWithoutRequestIdNamesAnotherComponent) {
  const json j = json::parse(
      json_log_line(example_time(), spdlog::level::warn, "engined", "checkpoint", "[not an id] x"));
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["component"], "checkpoint");
  EXPECT_EQ(j["message"], "[not an id] x");
  EXPECT_FALSE(j.contains("request_id"));
}

TEST(Log, JsonLineEscapesAnyBytes) {
  const std::string nasty = std::string("quote \" backslash \\ newline \n tab \t bad \xff\xfe end");
  const std::string line =
      json_log_line(example_time(), spdlog::level::err, "expertd", "expertd", nasty);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const json j = json::parse(line);
  EXPECT_EQ(j["level"], "error");
  EXPECT_CONTAINS(j["message"].get<std::string>(), "quote \" backslash \\ newline \n tab");
  EXPECT_CONTAINS(j["message"].get<std::string>(), "end");
}

TEST(Log, LinesOutsideTheLoggersFollowTheFormat) {
  set_log_format(LogFormat::kText, "expertd");
  EXPECT_FALSE(log_format_is_json());
  EXPECT_EQ(as_log_line("progress", "segment: 50.0%"), "segment: 50.0%");
  set_log_format(LogFormat::kJson, "expertd");
  EXPECT_TRUE(log_format_is_json());
  const json j = json::parse(as_log_line("progress", "segment: 50.0%"));
  set_log_format(LogFormat::kText, "");
  EXPECT_EQ(j["daemon"], "expertd");
  EXPECT_EQ(j["component"], "progress");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["message"], "segment: 50.0%");
}

TEST(Log, ParsesTheFormatNames) {
  EXPECT_EQ(parse_log_format("text"), LogFormat::kText);
  EXPECT_EQ(parse_log_format("json"), LogFormat::kJson);
  EXPECT_FALSE(parse_log_format("JSON").has_value());
  EXPECT_FALSE(parse_log_format("").has_value());
}

// What a logger writes to stderr, captured through a pipe.
std::string capture_stderr(const std::function<void()>& body) {
  std::fflush(stderr);
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const int saved = ::dup(2);
  ::dup2(fds[1], 2);
  ::close(fds[1]);
  body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  return out;
}

TEST(Log, LoggersWriteTheChosenFormat) {
  // The loggers are created after stderr is redirected: spdlog's sink holds
  // the FILE* stderr, which follows fd 2.
  const std::string text = capture_stderr([] {
    set_log_format(LogFormat::kText, "gateway");
    logger("log-test-text")->info("[req-1] hello");
    logger("log-test-text")->flush();
  });
  EXPECT_TRUE(std::regex_search(
      text,
      std::regex(
          R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d I \[log-test-text\] \[req-1\] hello\n$)")))
      << text;
  const std::string js = capture_stderr([] {
    set_log_format(LogFormat::kJson, "gateway");
    logger("log-test-text")->info("[req-2] again");  // an existing logger switches
    logger("log-test-json")->warn("new");            // and a new one starts in JSON
    logger("log-test-text")->flush();
    logger("log-test-json")->flush();
  });
  set_log_format(LogFormat::kText, "");
  const size_t nl = js.find('\n');
  ASSERT_NE(nl, std::string::npos) << js;
  const json a = json::parse(js.substr(0, nl));
  const json b = json::parse(js.substr(nl + 1));
  EXPECT_EQ(a["daemon"], "gateway");
  EXPECT_EQ(a["component"], "log-test-text");
  EXPECT_EQ(a["request_id"], "req-2");
  EXPECT_EQ(a["message"], "again");
  EXPECT_EQ(b["level"], "warning");
  EXPECT_EQ(b["message"], "new");
}

}  // namespace
}  // namespace k3::base
