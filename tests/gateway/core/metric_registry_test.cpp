// The Prometheus registry: exact exposition text for a small registry,
// escaping, histogram buckets, callback gauges, registration rules, and
// concurrent updates.
#include "gateway/core/metric_registry.h"

#include <cmath>
#include <stdexcept>
#include <thread>

#include "gtest/gtest.h"

namespace k3::gateway {
namespace {

TEST(Metrics, CallbackCountersAreTypedCounters) {
  MetricRegistry m;
  m.callback_counter("k3_engine_tokens_total", "From engined.", {"kind"}, [] {
    return std::vector<CallbackSample>{{{"prompt"}, 12.0}, {{"generated"}, 3.0}};
  });
  EXPECT_EQ(m.render(),
            "# HELP k3_engine_tokens_total From engined.\n"
            "# TYPE k3_engine_tokens_total counter\n"
            "k3_engine_tokens_total{kind=\"generated\"} 3\n"
            "k3_engine_tokens_total{kind=\"prompt\"} 12\n");
}

TEST(Metrics, ExactText) {
  MetricRegistry m;
  Counter& requests = m.counter("k3_requests_total", "Requests answered.");
  CounterFamily& by_code = m.counter_family("k3_http_responses_total",
                                            "HTTP responses by route and code.", {"route", "code"});
  Gauge& queue = m.gauge("k3_queue_depth", "Requests waiting.\nA second line with a \\.");
  Histogram& latency = m.histogram("k3_latency_seconds", "Request latency.", {0.5, 0.1, 1});
  m.callback_gauge("k3_expert_cache_hit_ratio", "From expertd.", {"expertd"}, [] {
    return std::vector<CallbackSample>{{{"b"}, 0.25}, {{"a"}, 0.75}, {{"down"}, std::nullopt}};
  });
  m.callback_gauge("k3_engined_up", "1 when engined answers.", [] { return 1.0; });

  requests.inc();
  requests.inc(2);
  by_code.with({"/v1/chat/completions", "200"}).inc();
  by_code.with({"/v1/models", "200"}).inc(3);
  by_code.with({"/v1/chat/completions", "200"}).inc();
  queue.set(5);
  queue.dec();
  queue.inc(0.5);
  latency.observe(0.05);
  latency.observe(0.1);  // le is inclusive
  latency.observe(0.7);
  latency.observe(30);

  EXPECT_EQ(m.render(),
            "# HELP k3_requests_total Requests answered.\n"
            "# TYPE k3_requests_total counter\n"
            "k3_requests_total 3\n"
            "# HELP k3_http_responses_total HTTP responses by route and code.\n"
            "# TYPE k3_http_responses_total counter\n"
            "k3_http_responses_total{route=\"/v1/chat/completions\",code=\"200\"} 2\n"
            "k3_http_responses_total{route=\"/v1/models\",code=\"200\"} 3\n"
            "# HELP k3_queue_depth Requests waiting.\\nA second line with a \\\\.\n"
            "# TYPE k3_queue_depth gauge\n"
            "k3_queue_depth 4.5\n"
            "# HELP k3_latency_seconds Request latency.\n"
            "# TYPE k3_latency_seconds histogram\n"
            "k3_latency_seconds_bucket{le=\"0.1\"} 2\n"
            "k3_latency_seconds_bucket{le=\"0.5\"} 2\n"
            "k3_latency_seconds_bucket{le=\"1\"} 3\n"
            "k3_latency_seconds_bucket{le=\"+Inf\"} 4\n"
            "k3_latency_seconds_sum 30.85\n"
            "k3_latency_seconds_count 4\n"
            "# HELP k3_expert_cache_hit_ratio From expertd.\n"
            "# TYPE k3_expert_cache_hit_ratio gauge\n"
            "k3_expert_cache_hit_ratio{expertd=\"a\"} 0.75\n"
            "k3_expert_cache_hit_ratio{expertd=\"b\"} 0.25\n"
            "# HELP k3_engined_up 1 when engined answers.\n"
            "# TYPE k3_engined_up gauge\n"
            "k3_engined_up 1\n");
}

TEST(Metrics, LabelledHistogram) {
  MetricRegistry m;
  HistogramFamily& h = m.histogram_family("k3_tokens", "Tokens.", {"kind"}, {10, 100});
  h.with({"prompt"}).observe(50);
  h.with({"completion"}).observe(5);
  EXPECT_EQ(m.render(),
            "# HELP k3_tokens Tokens.\n"
            "# TYPE k3_tokens histogram\n"
            "k3_tokens_bucket{kind=\"completion\",le=\"10\"} 1\n"
            "k3_tokens_bucket{kind=\"completion\",le=\"100\"} 1\n"
            "k3_tokens_bucket{kind=\"completion\",le=\"+Inf\"} 1\n"
            "k3_tokens_sum{kind=\"completion\"} 5\n"
            "k3_tokens_count{kind=\"completion\"} 1\n"
            "k3_tokens_bucket{kind=\"prompt\",le=\"10\"} 0\n"
            "k3_tokens_bucket{kind=\"prompt\",le=\"100\"} 1\n"
            "k3_tokens_bucket{kind=\"prompt\",le=\"+Inf\"} 1\n"
            "k3_tokens_sum{kind=\"prompt\"} 50\n"
            "k3_tokens_count{kind=\"prompt\"} 1\n");
}

TEST(Metrics, LabelValueEscaping) {
  MetricRegistry m;
  m.gauge_family("g", "h", {"model"}).with({"a\\b\"c\nd"}).set(1);
  EXPECT_EQ(m.render(), "# HELP g h\n# TYPE g gauge\ng{model=\"a\\\\b\\\"c\\nd\"} 1\n");
  EXPECT_EQ(escape_label_value("plain"), "plain");
}

TEST(Metrics, EmptyFamilyHasHeaderOnly) {
  MetricRegistry m;
  m.counter_family("c_total", "Nothing yet.", {"x"});
  EXPECT_EQ(m.render(), "# HELP c_total Nothing yet.\n# TYPE c_total counter\n");
}

TEST(Metrics, WrongLabelCountDoesNotCrash) {
  MetricRegistry m;
  CounterFamily& f = m.counter_family("c_total", "h", {"a", "b"});
  f.with({"x"}).inc();
  f.with({"x", "y", "z"}).inc();
  EXPECT_EQ(m.render(),
            "# HELP c_total h\n# TYPE c_total counter\n"
            "c_total{a=\"x\",b=\"\"} 1\n"
            "c_total{a=\"x\",b=\"y\"} 1\n");
}

TEST(Metrics, Values) {
  EXPECT_EQ(format_metric_value(0), "0");
  EXPECT_EQ(format_metric_value(0.1), "0.1");
  EXPECT_EQ(format_metric_value(-3), "-3");
  EXPECT_EQ(format_metric_value(1e21), "1e+21");
  EXPECT_EQ(format_metric_value(INFINITY), "+Inf");
  EXPECT_EQ(format_metric_value(-INFINITY), "-Inf");
  EXPECT_EQ(format_metric_value(NAN), "NaN");
  Counter c;
  c.inc(-5);  // counters never go down
  EXPECT_EQ(c.value(), 0);
}

TEST(Metrics, Registration) {
  MetricRegistry m;
  Counter& a = m.counter("same_total", "h");
  Counter& b = m.counter("same_total", "h");
  EXPECT_EQ(&a, &b);
  EXPECT_THROW(m.gauge("same_total", "h"), std::logic_error);
  EXPECT_THROW(m.counter_family("same_total", "h", {"x"}), std::logic_error);
  EXPECT_THROW(m.counter("1bad", "h"), std::logic_error);
  EXPECT_THROW(m.counter("bad-name", "h"), std::logic_error);
  EXPECT_THROW(m.counter_family("ok_total", "h", {"bad:label"}), std::logic_error);
  EXPECT_THROW(m.counter_family("ok2_total", "h", {"__reserved"}), std::logic_error);
  EXPECT_THROW(m.histogram_family("ok_seconds", "h", {"le"}, {1}), std::logic_error);
  EXPECT_NO_THROW(m.counter("ns:sub_total", "h"));
}

TEST(Metrics, ConcurrentUpdates) {
  MetricRegistry m;
  Counter& c = m.counter("c_total", "h");
  Gauge& g = m.gauge("g", "h");
  Histogram& h = m.histogram("h_seconds", "h", default_seconds_buckets());
  CounterFamily& f = m.counter_family("f_total", "h", {"t"});
  constexpr int kThreads = 4;
  constexpr int kIterations = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        c.inc();
        g.inc();
        g.dec(0.5);
        h.observe(0.001 * (i % 100));
        f.with({std::to_string(i % 3)}).inc();
        if (i % 5000 == 0) (void)m.render();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c.value(), kThreads * kIterations);
  EXPECT_EQ(g.value(), kThreads * kIterations * 0.5);
  const Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.count, static_cast<uint64_t>(kThreads * kIterations));
  EXPECT_EQ(s.cumulative.back(), s.count);
  double total = 0;
  for (const char* t : {"0", "1", "2"}) total += f.with({t}).value();
  EXPECT_EQ(total, kThreads * kIterations);
}

}  // namespace
}  // namespace k3::gateway
