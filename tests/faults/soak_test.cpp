// Soak (ctest -L soak): mixed clients against the three real daemons on the
// tiny model while a chaos driver SIGKILLs expertd, engined and the gateway
// at random moments (some mid-stream) and a supervisor restarts them as
// systemd's Restart=on-failure would. Afterwards:
//  - every request was answered correctly (a greedy request gives the text of
//    an undisturbed run) or refused/failed with a clear status;
//  - no daemon crashed by itself, none exceeded its RSS bound;
//  - after the final clean stop (exit 0 for all three) no segment, socket or
//    temporary file is left;
//  - the gateway's k3_requests_total agrees with what the clients saw, per
//    gateway lifetime (bounds at each kill, exact at the final stop).
// K3_SOAK_SECONDS sets the duration (default 600; tools/test.sh runs 150).
// A report goes to stdout.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>

#include "shared/status.h"
#include "tests/faults/daemon_stack.h"
#include "tests/faults/raw_http.h"
#include "tests/test_util.h"

namespace k3::faults_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// RSS bounds (kB) per daemon on the tiny model: expertd maps a 50 MB
// segment, engined holds the dense weights (a few MB) and per-session state,
// the gateway the tokenizer. Several times what an undisturbed run uses.
constexpr long kRssBoundKb[3] = {300 * 1024, 1024 * 1024, 400 * 1024};
constexpr double kRestartSec = 0.5;    // the units say 5 s; shorter to fit more kills
constexpr int kMinKillsPerDaemon = 5;  // the floor
constexpr int kClients = 4;
constexpr size_t kMaxBody = 65536;  // --max-body-bytes for the soak

double soak_seconds() {
  const char* e = std::getenv("K3_SOAK_SECONDS");
  return e != nullptr && std::atof(e) > 0 ? std::atof(e) : 600;
}

enum class Kind { kChat, kStream, kCancel, kHangUp, kTools, kOversized, kMalformed, kCount };
const char* kind_name(Kind k) {
  static const char* names[] = {"chat",  "stream",    "cancel",   "hang-up",
                                "tools", "oversized", "malformed"};
  return names[static_cast<int>(k)];
}

const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p = {
      "Tell me about drives.",     "What is a mixture of experts?", "Count to five.",
      "Write a haiku about NVMe.", "Why is the sky blue?",          "Name three rivers."};
  return p;
}

json tools_def() {
  return json::array({{{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"description", "Weather of a city"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}}}}},
                           {"required", {"city"}}}}}}}});
}

json chat_body(size_t prompt, bool stream, bool tools, int max_tokens = 8) {
  json b = {{"messages", {{{"role", "user"}, {"content", prompts()[prompt]}}}},
            {"max_tokens", max_tokens},
            {"temperature", 0}};
  if (stream) b["stream"] = true;
  if (tools) {
    b["tools"] = tools_def();
    b["tool_choice"] = "auto";
  }
  return b;
}

// What a greedy answer is compared on: the message (content, reasoning,
// tool calls) and the finish reason.
std::string answer_of(const json& reply) {
  const json& c = reply.at("choices").at(0);
  json m = c.at("message");
  if (m.contains("tool_calls"))
    for (json& t : m["tool_calls"]) t.erase("id");  // ids are random
  return m.dump() + " " + c.value("finish_reason", std::string());
}

// The same from a stream's chunks; empty when it did not end normally.
struct StreamResult {
  std::string text;  // content + reasoning, concatenated
  std::string finish;
  bool done = false;  // [DONE] arrived
  std::string error;  // an error event's message
  size_t content_events = 0;
};
StreamResult parse_sse(const std::string& body) {
  StreamResult r;
  size_t p = 0;
  while ((p = body.find("data: ", p)) != std::string::npos) {
    const size_t e = body.find("\n", p);
    if (e == std::string::npos) break;
    const std::string d = body.substr(p + 6, e - p - 6);
    p = e;
    if (d == "[DONE]") {
      r.done = true;
      continue;
    }
    const json j = json::parse(d, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.contains("error")) {
      r.error = j["error"].value("message", j["error"].dump());
      continue;
    }
    if (!j.contains("choices") || j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    const json& delta = c.value("delta", json::object());
    for (const char* f : {"reasoning_content", "content"})
      if (delta.contains(f) && delta[f].is_string()) {
        r.text += std::string(f) + ":" + delta[f].get<std::string>() + "|";
        ++r.content_events;
      }
    if (c.contains("finish_reason") && c["finish_reason"].is_string())
      r.finish = c["finish_reason"].get<std::string>();
  }
  return r;
}
// The comparable form of a non-streamed message, in parse_sse's terms.
std::string stream_form(const json& reply) {
  const json& m = reply.at("choices").at(0).at("message");
  std::string s;
  // Deltas split the strings differently: compare the concatenations.
  std::string reasoning, content;
  if (m.contains("reasoning_content") && m["reasoning_content"].is_string())
    reasoning = m["reasoning_content"].get<std::string>();
  if (m.contains("content") && m["content"].is_string()) content = m["content"].get<std::string>();
  return reasoning + "\x1f" + content;
}
std::string stream_concat(const std::string& events) {
  std::string reasoning, content;
  size_t p = 0;
  while (p < events.size()) {
    const size_t colon = events.find(':', p);
    const size_t bar = events.find('|', colon);
    const std::string field = events.substr(p, colon - p);
    (field == "content" ? content : reasoning) += events.substr(colon + 1, bar - colon - 1);
    p = bar + 1;
  }
  return reasoning + "\x1f" + content;
}

// One request as the client saw it.
struct Outcome {
  Kind kind;
  int gateway_life_start = 0, gateway_life_end = 0;  // gateway lifetime at send / reply
  long gateway_kills_start = 0, gateway_kills_end = 0;
  bool gateway_up_start = true, gateway_up_end = true;  // it accepted connections
  int status = 0;                                       // HTTP status (0: none)
  std::string verdict;  // "correct", "refused <code>", "connection refused", ...
  bool bad = false;     // a wrong answer or an unclear failure
  std::string detail;
  Clock::time_point sent, replied;
};

struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<int> gateway_life{0};
  std::atomic<long> gateway_kills{0};
  std::atomic<bool> gateway_up{true};  // accepts connections (false from a kill until it listens)
  std::atomic<int> streams_in_flight{0};
  std::mutex mu;
  std::vector<Outcome> outcomes;
  std::map<std::string, std::string> want;  // "prompt/tools" -> answer_of
  std::map<size_t, std::string> want_stream;
  int port = 0;
};

bool clear_error_body(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  return !j.is_discarded() && j.contains("error") && j["error"].contains("message") &&
         !j["error"]["message"].get<std::string>().empty();
}

// Whether the gateway was down, killed or restarted during the request.
bool gateway_disturbed(const Outcome& o) {
  return !o.gateway_up_start || !o.gateway_up_end || o.gateway_kills_start != o.gateway_kills_end ||
         o.gateway_life_start != o.gateway_life_end;
}

// Classifies a reply with no 200 answer to compare.
void failed(Outcome& o, const HttpReply& r) {
  if (r.status == 0) {
    o.verdict = r.error.find("connect") == 0 ? "connection refused (gateway down)"
                                             : "connection closed before a status";
    // Allowed only while the gateway was being killed or restarted.
    o.bad = !gateway_disturbed(o);
    o.detail = r.error;
    return;
  }
  o.verdict = "failed " + std::to_string(r.status);
  if (!r.complete) {
    o.verdict = "cut after status " + std::to_string(r.status);
    o.bad = o.gateway_kills_start == o.gateway_kills_end;
  } else if (!clear_error_body(r.body)) {
    o.bad = true;
    o.detail = "no OpenAI error body: " + r.body.substr(0, 300);
  } else {
    o.detail = json::parse(r.body)["error"]["message"].get<std::string>().substr(0, 200);
  }
}

// Sends one request of kind `k`; false when the service failed it (down,
// 5xx, cut), true when it answered as it should.
bool one_request(Shared& sh, Kind k, std::mt19937& rng) {
  Outcome o;
  o.kind = k;
  o.gateway_life_start = sh.gateway_life.load();
  o.gateway_kills_start = sh.gateway_kills.load();
  o.gateway_up_start = sh.gateway_up.load();
  o.sent = Clock::now();
  const size_t p = rng() % prompts().size();
  auto finish = [&] {
    o.replied = Clock::now();
    o.gateway_life_end = sh.gateway_life.load();
    o.gateway_kills_end = sh.gateway_kills.load();
    o.gateway_up_end = sh.gateway_up.load();
  };
  switch (k) {
    case Kind::kChat:
    case Kind::kTools: {
      const bool tools = k == Kind::kTools;
      HttpReply r = http_exchange(sh.port, "POST", "/v1/chat/completions",
                                  chat_body(p, false, tools).dump(), 120);
      finish();
      o.status = r.status;
      if (r.status == 200 && r.complete) {
        const json j = json::parse(r.body, nullptr, false);
        const std::string key = std::to_string(p) + (tools ? "/tools" : "");
        if (!j.is_discarded() && answer_of(j) == sh.want.at(key)) {
          o.verdict = "correct";
        } else {
          o.verdict = "WRONG ANSWER";
          o.bad = true;
          o.detail = r.body.substr(0, 400) + " want " + sh.want.at(key);
        }
      } else {
        failed(o, r);
      }
      break;
    }
    case Kind::kStream:
    case Kind::kCancel: {
      const bool cancel = k == Kind::kCancel;
      sh.streams_in_flight.fetch_add(1);
      HttpReply r = http_exchange(sh.port, "POST", "/v1/chat/completions",
                                  chat_body(p, true, false, cancel ? 64 : 8).dump(), 120,
                                  [&](const std::string& so_far) {
                                    return !(cancel && parse_sse(so_far).content_events > 0);
                                  });
      sh.streams_in_flight.fetch_sub(1);
      finish();
      o.status = r.status;
      if (r.status != 200) {
        failed(o, r);
        break;
      }
      const StreamResult s = parse_sse(r.body);
      if (cancel && !r.complete) {
        o.verdict = s.content_events > 0 ? "cancelled mid-stream" : "cut before any token";
        o.bad = s.content_events == 0 && o.gateway_kills_start == o.gateway_kills_end;
      } else if (!s.error.empty()) {
        o.verdict = "error event";
        o.detail = s.error.substr(0, 200);
      } else if (s.done && !s.finish.empty()) {
        if (!cancel && stream_concat(s.text) != sh.want_stream.at(p)) {
          o.verdict = "WRONG STREAM";
          o.bad = true;
          o.detail = s.text.substr(0, 300);
        } else {
          o.verdict = "correct";
        }
      } else {
        o.verdict = "stream cut";
        // Only the gateway's death may cut a stream without an error event.
        o.bad = o.gateway_kills_start == o.gateway_kills_end;
        o.detail = r.error + " " + r.body.substr(r.body.size() > 300 ? r.body.size() - 300 : 0);
      }
      break;
    }
    case Kind::kHangUp: {
      const bool sent = http_send_and_hang_up(sh.port, "/v1/chat/completions",
                                              chat_body(p, rng() % 2 == 0, false, 32).dump());
      finish();
      o.verdict = sent ? "hung up" : "connection refused (gateway down)";
      o.bad = !sent && !gateway_disturbed(o);
      break;
    }
    case Kind::kOversized: {
      json b = chat_body(p, false, false);
      b["messages"][0]["content"] = std::string(kMaxBody + 1000, 'x');
      HttpReply r = http_exchange(sh.port, "POST", "/v1/chat/completions", b.dump(), 60);
      finish();
      o.status = r.status;
      if (r.status == 413 && clear_error_body(r.body)) {
        o.verdict = "refused 413";
      } else if (r.status == 0) {
        failed(o, r);
      } else {
        o.verdict = "oversized got " + std::to_string(r.status);
        o.bad = true;
        o.detail = r.body.substr(0, 200);
      }
      break;
    }
    case Kind::kMalformed: {
      static const char* bodies[] = {"{\"messages\": [", "[1,2,3]",
                                     "{\"messages\": [{\"role\": \"user\", \"content\": "
                                     "\"x\"}], \"max_tokens\": \"many\"}",
                                     "{\"messages\": \"not a list\"}"};
      HttpReply r = http_exchange(sh.port, "POST", "/v1/chat/completions", bodies[rng() % 4], 60);
      finish();
      o.status = r.status;
      if (r.status == 400 && clear_error_body(r.body)) {
        o.verdict = "refused 400";
      } else if (r.status == 0) {
        failed(o, r);
      } else {
        o.verdict = "malformed got " + std::to_string(r.status);
        o.bad = true;
        o.detail = r.body.substr(0, 200);
      }
      break;
    }
    case Kind::kCount:
      break;
  }
  const bool served = o.verdict == "correct" || o.verdict == "cancelled mid-stream" ||
                      o.verdict == "hung up" || o.verdict.rfind("refused 4", 0) == 0;
  std::lock_guard<std::mutex> lock(sh.mu);
  sh.outcomes.push_back(std::move(o));
  return served;
}

void client_loop(Shared& sh, unsigned seed) {
  std::mt19937 rng(seed);
  // Weights: mostly answers to check, some of every other kind.
  const std::vector<std::pair<Kind, int>> mix = {
      {Kind::kChat, 6},  {Kind::kStream, 6},    {Kind::kCancel, 2},   {Kind::kHangUp, 2},
      {Kind::kTools, 3}, {Kind::kOversized, 1}, {Kind::kMalformed, 2}};
  int total = 0;
  for (const auto& m : mix) total += m.second;
  while (!sh.stop.load()) {
    int x = static_cast<int>(rng() % static_cast<unsigned>(total));
    Kind k = Kind::kChat;
    for (const auto& m : mix) {
      if (x < m.second) {
        k = m.first;
        break;
      }
      x -= m.second;
    }
    // A client the service failed backs off a little, as real ones do.
    const bool refused = !one_request(sh, k, rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 50 + (refused ? 100 : 0)));
  }
}

// k3_requests_total by code (summed over the api label).
std::map<int, long> requests_by_code(const std::string& metrics) {
  std::map<int, long> out;
  static const std::regex re("^k3_requests_total\\{([^}]*)\\} ([0-9.e+]+)$");
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, re)) continue;
    std::smatch c;
    const std::string labels = m[1];
    static const std::regex code_re("code=\"([0-9]+)\"");
    if (std::regex_search(labels, c, code_re))
      out[std::stoi(c[1])] += static_cast<long>(std::stod(m[2]));
  }
  return out;
}

std::map<int, long> scrape(int port) {
  HttpReply r = http_exchange(port, "GET", "/metrics", "", 10);
  if (r.status != 200) return {};
  return requests_by_code(r.body);
}

std::string fmt_codes(const std::map<int, long>& m) {
  std::string s;
  for (const auto& [c, n] : m) s += std::to_string(c) + ":" + std::to_string(n) + " ";
  return s;
}

// The client-side counts of one gateway lifetime, by the code the gateway
// must have counted: a 200/4xx/5xx the client received; a hang-up or a
// cancel is the gateway's 499. Requests in flight at `at` are unknowns.
struct Seen {
  std::map<int, long> codes;
  long unknown = 0;
};
Seen seen_in_lifetime(const std::vector<Outcome>& all, int life, Clock::time_point at) {
  Seen s;
  for (const Outcome& o : all) {
    if (o.gateway_life_start != life || o.sent > at) continue;
    const bool same_life = o.gateway_life_end == life;
    if (!same_life || o.replied > at) {
      ++s.unknown;
      continue;
    }
    if (o.status == 413) continue;  // refused by the HTTP layer: k3_http_wire_errors_total
    // A hang-up or a cancel is 499 when the gateway noticed, 200 when it had
    // finished; a stream's error event follows a 200 head.
    const bool streamed = o.kind == Kind::kStream || o.kind == Kind::kCancel;
    if (o.kind == Kind::kHangUp || (streamed && o.verdict != "correct")) {
      ++s.unknown;
      continue;
    }
    if (o.status != 0) ++s.codes[o.status];
  }
  return s;
}

TEST(Soak, ChaosKillsUnderMixedClientsLeaveNothingWrongOrBehind) {
  const double seconds = soak_seconds();
  testing::TempDir tmp;
  const std::string run = tmp.file("run");
  const std::string daemon_tmp = tmp.file("tmp");
  fs::create_directories(run);
  fs::create_directories(daemon_tmp);
  testing::tiny_model_dir();  // written before TMPDIR points at the daemons' directory
  ::setenv("TMPDIR", daemon_tmp.c_str(), 1);  // the daemons' temporary files land here
  const auto shm_before = testing::dir_snapshot("/dev/shm");
  StackOptions opt;
  opt.sessions = 2;
  opt.max_queue = 16;
  opt.gateway_extra = {"--max-body-bytes", std::to_string(kMaxBody)};
  DaemonStack s(run, opt);
  ASSERT_TRUE(s.start_all()) << s.logs();

  Shared sh;
  sh.port = s.http_port();
  // The undisturbed answers.
  for (size_t p = 0; p < prompts().size(); ++p)
    for (bool tools : {false, true}) {
      HttpReply r = http_exchange(sh.port, "POST", "/v1/chat/completions",
                                  chat_body(p, false, tools).dump(), 120);
      ASSERT_EQ(r.status, 200) << r.body << s.logs();
      Outcome o;
      o.kind = tools ? Kind::kTools : Kind::kChat;
      o.status = 200;
      o.verdict = "correct (undisturbed baseline)";
      o.sent = o.replied = Clock::now();
      sh.outcomes.push_back(o);
      const json j = json::parse(r.body);
      sh.want[std::to_string(p) + (tools ? "/tools" : "")] = answer_of(j);
      if (!tools) sh.want_stream[p] = stream_form(j);
    }
  std::array<long, 3> rss_before{};
  for (Daemon d : kDaemons) rss_before[static_cast<size_t>(d)] = s.rss_kb(d);

  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&sh, i] { client_loop(sh, 1000u + static_cast<unsigned>(i)); });

  // Chaos + supervisor, one thread (the only one touching the stack).
  std::mt19937 rng(42);
  std::array<int, 3> kills{};
  int mid_stream_kills = 0;
  std::vector<std::string> kill_log, crashes;
  std::array<long, 3> rss_max{};
  struct LifetimeCheck {
    int life;
    Clock::time_point at;
    std::map<int, long> metrics;
  };
  std::vector<LifetimeCheck> checks;
  const auto t0 = Clock::now();
  const double interval = seconds / (3.0 * kMinKillsPerDaemon + 3);
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::array<Clock::time_point, 3> down_since{};
  std::array<bool, 3> down{};
  auto next_kill = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                            interval * (0.5 + (rng() % 100) / 100.0)));
  auto done_killing = [&] {
    for (int k : kills)
      if (k < kMinKillsPerDaemon) return false;
    return elapsed() >= seconds;
  };
  while (!done_killing() || std::any_of(down.begin(), down.end(), [](bool b) { return b; })) {
    for (Daemon d : kDaemons) {
      const size_t i = static_cast<size_t>(d);
      rss_max[i] = std::max(rss_max[i], s.rss_kb(d));
      if (!down[i] && !s.running(d)) {
        // Exited without a kill from us: a crash (the supervisor restarts it
        // all the same, as systemd would).
        const int rc = s.signal(d, 0);
        crashes.push_back(cat(daemon_name(d), " exited by itself with ", rc, " at ",
                              static_cast<int>(elapsed()), " s"));
        if (d == Daemon::kGateway) sh.gateway_up.store(false);
        down[i] = true;
        down_since[i] = Clock::now();
      }
      if (down[i] && Clock::now() - down_since[i] >= std::chrono::duration<double>(kRestartSec)) {
        s.start(d);
        down[i] = false;
        if (d == Daemon::kGateway) sh.gateway_life.fetch_add(1);
      }
    }
    if (!sh.gateway_up.load() && !down[static_cast<size_t>(Daemon::kGateway)] &&
        http_exchange(sh.port, "GET", "/health", "", 2).status != 0)
      sh.gateway_up.store(true);
    if (!done_killing() && Clock::now() >= next_kill) {
      // The daemon killed least so far (ties at random), half the time
      // waiting for a stream in flight first.
      std::vector<Daemon> pick;
      const int least = *std::min_element(kills.begin(), kills.end());
      for (Daemon d : kDaemons)
        if (kills[static_cast<size_t>(d)] == least && !down[static_cast<size_t>(d)])
          pick.push_back(d);
      if (!pick.empty()) {
        const Daemon d = pick[rng() % pick.size()];
        const size_t i = static_cast<size_t>(d);
        if (rng() % 2 == 0) {
          const auto until = Clock::now() + std::chrono::seconds(3);
          while (sh.streams_in_flight.load() == 0 && Clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        const bool mid_stream = sh.streams_in_flight.load() > 0;
        if (d == Daemon::kGateway) {
          checks.push_back({sh.gateway_life.load(), Clock::now(), scrape(sh.port)});
          sh.gateway_up.store(false);
          sh.gateway_kills.fetch_add(1);
        }
        const int rc = s.signal(d, SIGKILL);
        if (d == Daemon::kGateway) sh.gateway_kills.fetch_add(1);
        ++kills[i];
        mid_stream_kills += mid_stream;
        kill_log.push_back(cat(static_cast<int>(elapsed()), "s ", daemon_name(d),
                               mid_stream ? " (mid-stream)" : "", " exit ", rc));
        down[i] = true;
        down_since[i] = Clock::now();
      }
      next_kill = Clock::now() +
                  std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(interval * (0.5 + (rng() % 100) / 100.0)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // All up again: the clients go on until the service answers, then stop.
  EXPECT_TRUE(s.wait_healthy(120)) << s.logs();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  sh.stop.store(true);
  for (auto& t : clients) t.join();
  std::array<long, 3> rss_after{};
  for (Daemon d : kDaemons) rss_after[static_cast<size_t>(d)] = s.rss_kb(d);
  // The last lifetime, quiescent: exact.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  checks.push_back({sh.gateway_life.load(), Clock::now(), scrape(sh.port)});
  const auto codes = s.stop_all();

  // ---- Report ----
  std::map<std::string, long> verdicts;
  std::map<std::string, long> per_kind;
  std::map<std::string, long> errors;  // failure messages, numbers blanked
  std::vector<std::string> bad;
  for (const Outcome& o : sh.outcomes) {
    ++verdicts[o.verdict];
    ++per_kind[kind_name(o.kind)];
    if (!o.detail.empty() && !o.bad)
      ++errors[o.verdict + ": " +
               std::regex_replace(o.detail.substr(0, 120), std::regex("[0-9a-zA-Z]{20,}|[0-9]+"),
                                  "N")];
    if (o.bad && bad.size() < 20)
      bad.push_back(cat(kind_name(o.kind), ": ", o.verdict, " ", o.detail));
  }
  std::printf("=== soak report (%.0f s, K3_SOAK_SECONDS=%s) ===\n", elapsed(),
              std::getenv("K3_SOAK_SECONDS") ? std::getenv("K3_SOAK_SECONDS") : "unset");
  std::printf("requests: %zu\n", sh.outcomes.size());
  for (const auto& [k, n] : per_kind) std::printf("  kind %-10s %ld\n", k.c_str(), n);
  for (const auto& [v, n] : verdicts) std::printf("  outcome %-40s %ld\n", v.c_str(), n);
  std::printf("errors by kind:\n");
  for (const auto& [e, n] : errors) std::printf("  %6ld  %s\n", n, e.c_str());
  std::printf("kills: expertd %d, engined %d, gateway %d (%d mid-stream)\n", kills[0], kills[1],
              kills[2], mid_stream_kills);
  for (const auto& k : kill_log) std::printf("  kill %s\n", k.c_str());
  for (Daemon d : kDaemons) {
    const size_t i = static_cast<size_t>(d);
    std::printf("rss %s: before %ld kB, after %ld kB, max %ld kB (bound %ld kB), lifetimes %d\n",
                daemon_name(d), rss_before[i], rss_after[i], rss_max[i], kRssBoundKb[i],
                s.lifetimes(d));
  }
  std::fflush(stdout);

  // ---- Checks ----
  for (const std::string& c : crashes) ADD_FAILURE() << c;
  EXPECT_TRUE(bad.empty()) << "requests neither answered correctly nor failed clearly:\n"
                           << [&] {
                                std::string s2;
                                for (const auto& b : bad) s2 += b + "\n";
                                return s2;
                              }();
  EXPECT_GT(verdicts["correct"], 0);
  for (int k : kills) EXPECT_GE(k, kMinKillsPerDaemon);
  EXPECT_GT(mid_stream_kills, 0);
  for (Daemon d : kDaemons) {
    const size_t i = static_cast<size_t>(d);
    EXPECT_LE(rss_max[i], kRssBoundKb[i]) << daemon_name(d);
    EXPECT_EQ(codes[i], 0) << daemon_name(d) << " did not stop cleanly\n" << s.logs();
  }
  // Metrics per gateway lifetime.
  {
    std::lock_guard<std::mutex> lock(sh.mu);
    for (size_t c = 0; c < checks.size(); ++c) {
      const LifetimeCheck& lc = checks[c];
      const bool last = c + 1 == checks.size();
      const Seen seen = seen_in_lifetime(sh.outcomes, lc.life, lc.at);
      long metric_total = 0, seen_total = 0;
      for (const auto& [code, n] : lc.metrics) metric_total += n;
      for (const auto& [code, n] : seen.codes) seen_total += n;
      std::printf("metrics lifetime %d%s: gateway %s| clients %s+ %ld unknown\n", lc.life,
                  last ? " (final)" : "", fmt_codes(lc.metrics).c_str(),
                  fmt_codes(seen.codes).c_str(), seen.unknown);
      if (lc.metrics.empty() && seen_total + seen.unknown == 0) continue;
      for (const auto& [code, n] : seen.codes) {
        const long m = lc.metrics.count(code) ? lc.metrics.at(code) : 0;
        EXPECT_GE(m, n) << "lifetime " << lc.life << " code " << code
                        << ": the clients saw more than the gateway counted";
        EXPECT_LE(m, n + seen.unknown) << "lifetime " << lc.life << " code " << code;
      }
      EXPECT_LE(metric_total, seen_total + seen.unknown) << "lifetime " << lc.life;
      if (last) EXPECT_GE(metric_total, seen_total) << "final lifetime";
    }
  }
  // Nothing left behind.
  EXPECT_FALSE(fs::exists("/dev/shm/" + s.segment()));
  EXPECT_FALSE(fs::exists(s.expertd_socket()));
  EXPECT_FALSE(fs::exists(s.engined_socket()));
  EXPECT_EQ(testing::dir_snapshot(daemon_tmp), std::vector<std::string>{});
  std::vector<std::string> shm_new;
  const auto shm_after = testing::dir_snapshot("/dev/shm");
  for (const auto& e : shm_after)
    if (e.find(s.segment()) != std::string::npos ||
        (std::find(shm_before.begin(), shm_before.end(), e) == shm_before.end() &&
         e.rfind("k3faults", 0) == 0))
      shm_new.push_back(e);
  EXPECT_TRUE(shm_new.empty()) << shm_new.front();
  std::printf("errors (unclear or wrong): %zu; crashes: %zu\n", bad.size(), crashes.size());
}

}  // namespace
}  // namespace k3::faults_test
