// deploy/grafana/k3serve.json against the running service: every PromQL
// expression of the dashboard (panel targets and template queries) parses,
// and every metric it names is declared (# TYPE) on /metrics of a stack of
// the three daemons on the tiny model (the gateway's /metrics is the
// service's only one: it carries engined's and every expertd's and storage
// host's figures).
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/gateway/stack_fixture.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;

// --- A PromQL reader: enough of the grammar to find metric names ----------

const std::set<std::string> kAggregations = {
    "sum",  "avg",     "min",      "max",          "count", "stddev", "stdvar",
    "topk", "bottomk", "quantile", "count_values", "group", "limitk", "limit_ratio"};
const std::set<std::string> kFunctions = {"rate",
                                          "irate",
                                          "increase",
                                          "delta",
                                          "idelta",
                                          "deriv",
                                          "histogram_quantile",
                                          "histogram_count",
                                          "histogram_sum",
                                          "histogram_fraction",
                                          "abs",
                                          "ceil",
                                          "floor",
                                          "round",
                                          "clamp",
                                          "clamp_min",
                                          "clamp_max",
                                          "label_replace",
                                          "label_join",
                                          "vector",
                                          "scalar",
                                          "time",
                                          "sort",
                                          "sort_desc",
                                          "absent",
                                          "absent_over_time",
                                          "avg_over_time",
                                          "max_over_time",
                                          "min_over_time",
                                          "sum_over_time",
                                          "count_over_time",
                                          "last_over_time",
                                          "quantile_over_time",
                                          "changes",
                                          "resets",
                                          "predict_linear",
                                          "exp",
                                          "ln",
                                          "log2",
                                          "log10",
                                          "sqrt",
                                          "timestamp"};
const std::set<std::string> kLabelListKeywords = {"by",       "without",    "on",
                                                  "ignoring", "group_left", "group_right"};
const std::set<std::string> kKeywords = {"and", "or", "unless", "bool", "offset"};

struct Parsed {
  std::set<std::string> metrics;
  std::string error;  // empty when it parsed
};

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool ident_char(char c) {
  return ident_start(c) || std::isdigit(static_cast<unsigned char>(c));
}

// Grafana's variables: rate intervals become a duration, others a word.
std::string expand_grafana_variables(std::string e) {
  for (const char* v : {"$__rate_interval", "$__interval", "$__range"}) {
    for (size_t p; (p = e.find(v)) != std::string::npos;) e.replace(p, std::strlen(v), "5m");
  }
  return e;
}

Parsed parse_promql(const std::string& raw) {
  Parsed out;
  const std::string e = expand_grafana_variables(raw);
  size_t i = 0;
  int depth = 0;
  auto fail = [&](const std::string& why) {
    out.error = why + " at " + std::to_string(i) + " in: " + raw;
    return out;
  };
  auto skip_space = [&] {
    while (i < e.size() && std::isspace(static_cast<unsigned char>(e[i]))) ++i;
  };
  auto read_ident = [&] {
    const size_t b = i;
    while (i < e.size() && ident_char(e[i])) ++i;
    return e.substr(b, i - b);
  };
  auto read_string = [&]() -> bool {
    const char q = e[i++];
    while (i < e.size() && e[i] != q) i += e[i] == '\\' ? 2 : 1;
    if (i >= e.size()) return false;
    ++i;
    return true;
  };
  bool want_operand = true;  // a vector, number, function or '(' comes next
  while (true) {
    skip_space();
    if (i >= e.size()) break;
    const char c = e[i];
    if (c == '"' || c == '\'' || c == '`') {
      if (!read_string()) return fail("unterminated string");
      want_operand = false;
    } else if (c == '{') {  // label matchers: name op "value", ...
      ++i;
      for (;;) {
        skip_space();
        if (i < e.size() && e[i] == '}') break;
        if (i >= e.size() || !ident_start(e[i])) return fail("label name expected");
        read_ident();
        skip_space();
        const std::string op = e.substr(i, 2);
        if (op == "=~" || op == "!~" || op == "!=")
          i += 2;
        else if (i < e.size() && e[i] == '=')
          ++i;
        else
          return fail("matcher operator expected");
        skip_space();
        if (i >= e.size() || (e[i] != '"' && e[i] != '\'' && e[i] != '`'))
          return fail("matcher value expected");
        if (!read_string()) return fail("unterminated string");
        skip_space();
        if (i < e.size() && e[i] == ',') ++i;
      }
      ++i;
      want_operand = false;
    } else if (c == '[') {  // a range or subquery: 5m, 5m:1m
      const size_t end = e.find(']', i);
      if (end == std::string::npos) return fail("unterminated range");
      const std::string d = e.substr(i + 1, end - i - 1);
      for (char ch : d)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != ':')
          return fail("bad range '" + d + "'");
      i = end + 1;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && want_operand)) {
      while (i < e.size() &&
             (std::isalnum(static_cast<unsigned char>(e[i])) || e[i] == '.' ||
              ((e[i] == '+' || e[i] == '-') && (e[i - 1] == 'e' || e[i - 1] == 'E'))))
        ++i;
      want_operand = false;
    } else if (ident_start(c)) {
      const std::string word = read_ident();
      skip_space();
      const bool call = i < e.size() && e[i] == '(';
      if (kLabelListKeywords.count(word)) {
        if (!call) {
          if (word == "group_left" || word == "group_right") continue;
          return fail("'(' expected after " + word);
        }
        const size_t end = e.find(')', i);
        if (end == std::string::npos) return fail("unterminated label list");
        for (char ch : e.substr(i + 1, end - i - 1))
          if (!ident_char(ch) && ch != ',' && !std::isspace(static_cast<unsigned char>(ch)))
            return fail("bad label list");
        i = end + 1;
      } else if (kKeywords.count(word)) {
        want_operand = true;
      } else if (kAggregations.count(word)) {
        want_operand = true;  // its "by (...)" and "(" follow
      } else if (call) {
        if (!kFunctions.count(word)) return fail("unknown function " + word);
      } else {
        if (!want_operand) return fail("operator expected before " + word);
        out.metrics.insert(word);
        want_operand = false;
      }
    } else if (c == '(') {
      ++depth, ++i;
      want_operand = true;
    } else if (c == ')') {
      if (--depth < 0) return fail("unbalanced ')'");
      ++i;
      want_operand = false;
    } else if (c == ',') {
      ++i;
      want_operand = true;
    } else if (std::string("+-*/%^=!<>").find(c) != std::string::npos) {
      ++i;
      if (i < e.size() && e[i] == '=') ++i;
      want_operand = true;
    } else {
      return fail(std::string("unexpected '") + c + "'");
    }
  }
  if (depth != 0) return fail("unbalanced '('");
  if (want_operand) return fail("expression ends early");
  return out;
}

// The names /metrics declares (# TYPE lines); a histogram's _bucket, _sum
// and _count are its own.
std::set<std::string> declared_metrics(const std::string& exposition) {
  std::set<std::string> names;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream l(line.substr(7));
    std::string name, type;
    l >> name >> type;
    names.insert(name);
    if (type == "histogram" || type == "summary")
      for (const char* s : {"_bucket", "_sum", "_count"}) names.insert(name + s);
  }
  return names;
}

// Every expression of a dashboard: targets of every panel (rows' nested
// panels too) and template variables' queries (label_values(METRIC, label)).
void collect_expressions(const json& panels, std::vector<std::string>& out) {
  for (const json& p : panels) {
    if (p.contains("targets"))
      for (const json& t : p["targets"])
        if (t.contains("expr")) out.push_back(t["expr"]);
    if (p.contains("panels")) collect_expressions(p["panels"], out);
  }
}

std::vector<std::string> dashboard_expressions(const json& d) {
  std::vector<std::string> out;
  collect_expressions(d["panels"], out);
  for (const json& v : d["templating"]["list"]) {
    if (v["type"] != "query") continue;
    std::string q = v["query"].is_object() ? v["query"]["query"].get<std::string>()
                                           : v["query"].get<std::string>();
    // label_values(EXPR, label) -> EXPR
    if (q.rfind("label_values(", 0) == 0) {
      q = q.substr(13, q.rfind(',') - 13);
    }
    out.push_back(q);
  }
  return out;
}

json load_dashboard() {
  std::ifstream in(testing::source_dir() + "/deploy/grafana/k3serve.json");
  return json::parse(in);
}

TEST(PromqlReader, FindsMetricNamesAndRefusesWhatIsNotPromql) {
  Parsed p = parse_promql(
      "histogram_quantile(0.95, sum by (le, api) (rate(k3_a_bucket{instance=~\"$instance\", "
      "code!~\"2..\"}[$__rate_interval]))) / on (api) group_left k3_b * 1e9 + sum(k3_c offset 5m)");
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.metrics, (std::set<std::string>{"k3_a_bucket", "k3_b", "k3_c"}));
  EXPECT_NE(parse_promql("rate(k3_a[5m]").error, "");
  EXPECT_NE(parse_promql("k3_a{code=2}").error, "");
  EXPECT_NE(parse_promql("rates(k3_a[5m])").error, "");
  EXPECT_NE(parse_promql("k3_a k3_b").error, "");
  EXPECT_NE(parse_promql("sum(k3_a) /").error, "");
  const std::set<std::string> declared =
      declared_metrics("# HELP k3_h x\n# TYPE k3_h histogram\n# TYPE k3_c counter\nk3_c 1\n");
  EXPECT_EQ(declared,
            (std::set<std::string>{"k3_h", "k3_h_bucket", "k3_h_sum", "k3_h_count", "k3_c"}));
}

TEST(GrafanaDashboard, EveryExpressionParsesAndCoversEachComponent) {
  const json d = load_dashboard();
  EXPECT_EQ(d["uid"], "k3serve");
  // Grafana needs each panel's id unique and each target's refId unique in its panel.
  std::set<int> ids;
  for (const json& p : d["panels"]) {
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "panel id " << p["id"] << " twice";
    EXPECT_TRUE(p.contains("gridPos")) << p["title"];
    std::set<std::string> refs;
    for (const json& t : p.value("targets", json::array()))
      EXPECT_TRUE(refs.insert(t["refId"].get<std::string>()).second) << p["title"];
  }
  const std::vector<std::string> exprs = dashboard_expressions(d);
  ASSERT_GT(exprs.size(), 20u);
  std::set<std::string> names;
  for (const std::string& e : exprs) {
    Parsed p = parse_promql(e);
    EXPECT_EQ(p.error, "");
    EXPECT_FALSE(p.metrics.empty()) << e;
    names.insert(p.metrics.begin(), p.metrics.end());
  }
  // What the issue asks the dashboard to show, by the metric that shows it.
  for (const char* must :
       {"k3_generated_tokens_total", "k3_decode_seconds_per_token_bucket",
        "k3_time_to_first_token_seconds_bucket", "k3_queue_depth", "k3_expert_hit_ratio",
        "k3_expert_read_gbps", "k3_requests_total", "k3_request_duration_seconds_bucket",
        "k3_request_prompt_tokens_bucket", "k3_request_completion_tokens_bucket",
        "k3_engine_tokens_total", "k3_up", "k3_remote_expertd_up", "k3_expert_read_io_errors_total",
        "k3_build_info"})
    EXPECT_TRUE(names.count(must)) << must;
}

TEST(GrafanaDashboard, EveryMetricItNamesIsExportedByTheRunningService) {
  testing::StackOptions o;
  o.expertd = 1;
  testing::Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  // One answered request, so the per-route families have a child to show.
  auto r = s.post("/v1/chat/completions", testing::chat_body("hello", 4));
  ASSERT_TRUE(r) << s.logs();
  ASSERT_EQ(r->status, 200) << r->body;
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m && m->status == 200);
  const std::set<std::string> declared = declared_metrics(m->body);
  for (const std::string& e : dashboard_expressions(load_dashboard())) {
    const Parsed p = parse_promql(e);
    for (const std::string& name : p.metrics) {
      if (declared.count(name)) continue;
      ADD_FAILURE() << name << " (in: " << e << ") is not declared on /metrics";
    }
  }
  // Per expertd (d0, the stack's one): its drive's rate and its cache, while
  // the gateway's poll finds it healthy (a poll late on a loaded machine
  // leaves it out of one scrape: look again).
  std::string page = m->body;
  for (int i = 0;
       i < 300 && page.find("k3_expertd_read_gbps{expertd=\"d0\"} ") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (auto again = s.client().Get("/metrics"); again && again->status == 200) page = again->body;
  }
  EXPECT_CONTAINS(page, "k3_expertd_read_gbps{expertd=\"d0\"} ");
  EXPECT_CONTAINS(page, "k3_expertd_hit_ratio{expertd=\"d0\"} ");
  EXPECT_CONTAINS(page, "k3_expertd_bytes_read_total{expertd=\"d0\"} ");
  // The model label on the per-route families.
  const std::string model = json::parse(s.client().Get("/v1/models")->body)["data"][0]["id"];
  EXPECT_CONTAINS(m->body,
                  "k3_request_duration_seconds_count{api=\"chat\",model=\"" + model + "\"} 1\n");
  EXPECT_CONTAINS(m->body, "k3_request_completion_tokens_bucket{api=\"chat\",model=\"" + model +
                               "\",le=\"4\"} 1\n");
}

}  // namespace
}  // namespace k3
