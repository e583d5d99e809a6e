// A small Prometheus registry and its text exposition format (version 0.0.4),
// for GET /metrics. Debian 12 ships no prometheus-cpp, and the format is a
// page of text, so it is written here.
//
// Thread safety: everything is thread-safe. Counter and Gauge values are
// atomics (lock-free updates on the request path); a Histogram takes its own
// mutex per observation so that a render never sees a _count that disagrees
// with its buckets; a family's mutex guards only the creation of children;
// the registry's mutex guards only registration. Metrics live as long as the
// registry: references returned by it and by Family::with stay valid.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace k3::gateway {

class Counter {
 public:
  // `v` should be >= 0 (Prometheus counters only go up); negative is ignored.
  void inc(double v = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double v = 1.0) { value_.fetch_add(v, std::memory_order_relaxed); }
  void dec(double v = 1.0) { value_.fetch_sub(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, sorted ascending; +Inf is implied.
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then one more for +Inf
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// Default latency buckets in seconds (Prometheus clients' defaults, extended
// to minutes: a long generation takes that long).
std::vector<double> default_seconds_buckets();

enum class MetricKind { kCounter, kGauge, kHistogram };

// One metric name with its HELP text and label names; a child per distinct
// tuple of label values (a metric without labels has one child, with()).
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}
  virtual ~FamilyBase() = default;
  virtual MetricKind kind() const = 0;
  // Appends this family's exposition text (HELP, TYPE, samples) to `out`.
  virtual void render(std::string& out) const = 0;

  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

 protected:
  void render_header(std::string& out, std::string_view type) const;
  // A histogram's _bucket, _sum and _count lines for one child.
  void render_histogram(const std::vector<std::string>& values, const Histogram::Snapshot& s,
                        std::string& out) const;
  // `{a="x",b="y"}` (with `extra` appended, e.g. le="0.5"), or "" without labels.
  std::string label_text(const std::vector<std::string>& values, std::string_view extra = "") const;

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

template <typename T>
class Family : public FamilyBase {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names, MetricKind kind,
         std::vector<double> bounds = {})
      : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
        kind_(kind),
        bounds_(std::move(bounds)) {}

  // The child for these label values, created on first use. A wrong number
  // of values is a programming error: missing ones are taken as "", extras
  // dropped (a metrics slip must not take the gateway down).
  T& with(std::vector<std::string> label_values = {});

  MetricKind kind() const override { return kind_; }
  void render(std::string& out) const override;

 private:
  const MetricKind kind_;
  const std::vector<double> bounds_;  // histograms only
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_;
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// A gauge whose samples are computed at render time (values fetched from
// engined or expertd). The callback runs on the rendering thread without any
// registry lock held; it should be quick (return cached values). A sample
// with no value (the source is unreachable) is left out.
struct CallbackSample {
  std::vector<std::string> label_values;
  std::optional<double> value;
};
using GaugeCallback = std::function<std::vector<CallbackSample>()>;

// A histogram computed at render time (engined's per-host round trips): its
// snapshot's cumulative counts, one per bound plus +Inf (a malformed
// snapshot - sizes that disagree, counts going down - is left out).
struct CallbackHistogramSample {
  std::vector<std::string> label_values;
  Histogram::Snapshot snapshot;
};
using HistogramCallback = std::function<std::vector<CallbackHistogramSample>()>;

class MetricRegistry {
 public:
  // Registration: `name` must match [a-zA-Z_:][a-zA-Z0-9_:]* and label names
  // [a-zA-Z_][a-zA-Z0-9_]* (not "le" for histograms). Registering a name
  // again returns the existing family when kind and labels match. These are
  // start-up calls with constant arguments: a bad name or a clash throws
  // std::logic_error.
  CounterFamily& counter_family(std::string name, std::string help,
                                std::vector<std::string> label_names);
  GaugeFamily& gauge_family(std::string name, std::string help,
                            std::vector<std::string> label_names);
  HistogramFamily& histogram_family(std::string name, std::string help,
                                    std::vector<std::string> label_names,
                                    std::vector<double> bounds);
  // Unlabelled shorthands.
  Counter& counter(std::string name, std::string help) {
    return counter_family(std::move(name), std::move(help), {}).with();
  }
  Gauge& gauge(std::string name, std::string help) {
    return gauge_family(std::move(name), std::move(help), {}).with();
  }
  Histogram& histogram(std::string name, std::string help, std::vector<double> bounds) {
    return histogram_family(std::move(name), std::move(help), {}, std::move(bounds)).with();
  }
  void callback_gauge(std::string name, std::string help, std::vector<std::string> label_names,
                      GaugeCallback callback);
  // A counter whose values come from elsewhere (engined's and expertd's own
  // counters): typed "counter", name ending in _total.
  void callback_counter(std::string name, std::string help, std::vector<std::string> label_names,
                        GaugeCallback callback);
  void callback_histogram(std::string name, std::string help, std::vector<std::string> label_names,
                          HistogramCallback callback);
  // Unlabelled: one value, or none.
  void callback_gauge(std::string name, std::string help,
                      std::function<std::optional<double>()> callback);

  // The text exposition format, families in registration order, children
  // sorted by label values.
  std::string render() const;
  // Its Content-Type.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  FamilyBase& add(std::unique_ptr<FamilyBase> family);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<FamilyBase>> families_;
};

// Prometheus number text: shortest round-trip form, "+Inf", "-Inf", "NaN".
std::string format_metric_value(double v);
// Label value escaping: backslash, double quote and newline.
std::string escape_label_value(std::string_view v);

}  // namespace k3::gateway
