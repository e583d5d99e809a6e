#include "gateway/core/metric_registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace k3::gateway {
namespace {

bool valid_name(std::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

// The text format's escaping: backslash and newline always; double quotes
// in label values only (HELP text keeps them).
std::string escape_text(std::string_view v, bool quotes) {
  std::string out;
  out.reserve(v.size());
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quotes && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

const char* type_name(MetricKind kind) {
  switch (kind) {
    case MetricKind::kCounter:
      return "counter";
    case MetricKind::kGauge:
      return "gauge";
    case MetricKind::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Callback gauges and counters: samples computed by the callback at render
// time.
class CallbackFamily : public FamilyBase {
 public:
  CallbackFamily(std::string name, std::string help, std::vector<std::string> label_names,
                 GaugeCallback callback, MetricKind kind = MetricKind::kGauge)
      : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
        callback_(std::move(callback)),
        kind_(kind) {}

  MetricKind kind() const override { return kind_; }

  void render(std::string& out) const override {
    render_header(out, type_name(kind_));
    std::vector<CallbackSample> samples = callback_();
    std::sort(samples.begin(), samples.end(), [](const CallbackSample& a, const CallbackSample& b) {
      return a.label_values < b.label_values;
    });
    for (const CallbackSample& s : samples) {
      if (!s.value.has_value()) continue;
      out += name_;
      out += label_text(s.label_values);
      out += ' ';
      out += format_metric_value(*s.value);
      out += '\n';
    }
  }

 private:
  const GaugeCallback callback_;
  const MetricKind kind_;
};

class CallbackHistogramFamily : public FamilyBase {
 public:
  CallbackHistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                          HistogramCallback callback)
      : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
        callback_(std::move(callback)) {}

  MetricKind kind() const override { return MetricKind::kHistogram; }

  void render(std::string& out) const override {
    render_header(out, type_name(MetricKind::kHistogram));
    std::vector<CallbackHistogramSample> samples = callback_();
    std::sort(samples.begin(), samples.end(),
              [](const auto& a, const auto& b) { return a.label_values < b.label_values; });
    for (const CallbackHistogramSample& s : samples) {
      const Histogram::Snapshot& h = s.snapshot;
      if (h.cumulative.size() != h.bounds.size() + 1 ||
          !std::is_sorted(h.cumulative.begin(), h.cumulative.end()) ||
          h.cumulative.back() != h.count)
        continue;
      render_histogram(s.label_values, h, out);
    }
  }

 private:
  const HistogramCallback callback_;
};

template <typename T>
std::unique_ptr<T> make_child(const std::vector<double>& bounds) {
  if constexpr (std::is_same_v<T, Histogram>) {
    return std::make_unique<Histogram>(bounds);
  } else {
    return std::make_unique<T>();
  }
}

}  // namespace

// ---- values ----

void Counter::inc(double v) {
  if (!(v >= 0.0)) return;
  value_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  // The first bucket whose upper bound is >= v ("le" is inclusive); NaN
  // lands in +Inf.
  const size_t bucket =
      std::isnan(v) ? bounds_.size()
                    : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                          bounds_.begin());
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[bucket];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t running = 0;
  for (const uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> default_seconds_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

// ---- families ----

void FamilyBase::render_header(std::string& out, std::string_view type) const {
  out += "# HELP ";
  out += name_;
  out += ' ';
  out += escape_text(help_, /*quotes=*/false);
  out += "\n# TYPE ";
  out += name_;
  out += ' ';
  out += type;
  out += '\n';
}

std::string FamilyBase::label_text(const std::vector<std::string>& values,
                                   std::string_view extra) const {
  std::string out;
  const size_t n = std::min(values.size(), label_names_.size());
  for (size_t i = 0; i < n; ++i) {
    out += out.empty() ? "{" : ",";
    out += label_names_[i];
    out += "=\"";
    out += escape_label_value(values[i]);
    out += '"';
  }
  if (!extra.empty()) {
    out += out.empty() ? "{" : ",";
    out += extra;
  }
  if (!out.empty()) out += '}';
  return out;
}

void FamilyBase::render_histogram(const std::vector<std::string>& values,
                                  const Histogram::Snapshot& s, std::string& out) const {
  for (size_t b = 0; b < s.cumulative.size(); ++b) {
    const std::string le = b < s.bounds.size() ? format_metric_value(s.bounds[b]) : "+Inf";
    out += name_;
    out += "_bucket";
    out += label_text(values, "le=\"" + le + "\"");
    out += ' ';
    out += std::to_string(s.cumulative[b]);
    out += '\n';
  }
  out += name_ + "_sum" + label_text(values) + ' ' + format_metric_value(s.sum) + '\n';
  out += name_ + "_count" + label_text(values) + ' ' + std::to_string(s.count) + '\n';
}

template <typename T>
T& Family<T>::with(std::vector<std::string> label_values) {
  label_values.resize(label_names_.size());
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<T>& child = children_[label_values];
  if (child == nullptr) child = make_child<T>(bounds_);
  return *child;
}

template <typename T>
void Family<T>::render(std::string& out) const {
  render_header(out, type_name(kind_));
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [values, child] : children_) {
    if constexpr (std::is_same_v<T, Histogram>) {
      render_histogram(values, child->snapshot(), out);
    } else {
      out += name_;
      out += label_text(values);
      out += ' ';
      out += format_metric_value(child->value());
      out += '\n';
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ---- the registry ----

FamilyBase& MetricRegistry::add(std::unique_ptr<FamilyBase> family) {
  if (!valid_name(family->name(), /*allow_colon=*/true)) {
    throw std::logic_error("metric name '" + family->name() + "' is not valid");
  }
  for (const std::string& label : family->label_names()) {
    if (!valid_name(label, /*allow_colon=*/false) || label.starts_with("__") ||
        (family->kind() == MetricKind::kHistogram && label == "le")) {
      throw std::logic_error("label name '" + label + "' of metric '" + family->name() +
                             "' is not valid");
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::unique_ptr<FamilyBase>& f : families_) {
    if (f->name() != family->name()) continue;
    // The same registration again (two components counting the same thing)
    // shares the family; callback gauges are never shared.
    if (f->kind() == family->kind() && f->label_names() == family->label_names() &&
        dynamic_cast<CallbackFamily*>(f.get()) == nullptr &&
        dynamic_cast<CallbackFamily*>(family.get()) == nullptr &&
        dynamic_cast<CallbackHistogramFamily*>(f.get()) == nullptr &&
        dynamic_cast<CallbackHistogramFamily*>(family.get()) == nullptr) {
      return *f;
    }
    throw std::logic_error("metric '" + family->name() + "' is registered twice, differently");
  }
  families_.push_back(std::move(family));
  return *families_.back();
}

CounterFamily& MetricRegistry::counter_family(std::string name, std::string help,
                                              std::vector<std::string> label_names) {
  return static_cast<CounterFamily&>(add(std::make_unique<CounterFamily>(
      std::move(name), std::move(help), std::move(label_names), MetricKind::kCounter)));
}

GaugeFamily& MetricRegistry::gauge_family(std::string name, std::string help,
                                          std::vector<std::string> label_names) {
  return static_cast<GaugeFamily&>(add(std::make_unique<GaugeFamily>(
      std::move(name), std::move(help), std::move(label_names), MetricKind::kGauge)));
}

HistogramFamily& MetricRegistry::histogram_family(std::string name, std::string help,
                                                  std::vector<std::string> label_names,
                                                  std::vector<double> bounds) {
  // Prometheus requires increasing bounds; +Inf is always added by render.
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  bounds.erase(std::remove_if(bounds.begin(), bounds.end(),
                              [](double b) { return std::isnan(b) || std::isinf(b); }),
               bounds.end());
  return static_cast<HistogramFamily&>(add(
      std::make_unique<HistogramFamily>(std::move(name), std::move(help), std::move(label_names),
                                        MetricKind::kHistogram, std::move(bounds))));
}

void MetricRegistry::callback_gauge(std::string name, std::string help,
                                    std::vector<std::string> label_names, GaugeCallback callback) {
  add(std::make_unique<CallbackFamily>(std::move(name), std::move(help), std::move(label_names),
                                       std::move(callback)));
}

void MetricRegistry::callback_counter(std::string name, std::string help,
                                      std::vector<std::string> label_names,
                                      GaugeCallback callback) {
  add(std::make_unique<CallbackFamily>(std::move(name), std::move(help), std::move(label_names),
                                       std::move(callback), MetricKind::kCounter));
}

void MetricRegistry::callback_histogram(std::string name, std::string help,
                                        std::vector<std::string> label_names,
                                        HistogramCallback callback) {
  add(std::make_unique<CallbackHistogramFamily>(std::move(name), std::move(help),
                                                std::move(label_names), std::move(callback)));
}

void MetricRegistry::callback_gauge(std::string name, std::string help,
                                    std::function<std::optional<double>()> callback) {
  callback_gauge(std::move(name), std::move(help), {},
                 [callback = std::move(callback)]() -> std::vector<CallbackSample> {
                   return {CallbackSample{{}, callback()}};
                 });
}

std::string MetricRegistry::render() const {
  // Families are never removed, so the pointers outlive the lock; rendering
  // without it lets callbacks take their time without blocking registration.
  std::vector<const FamilyBase*> families;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::unique_ptr<FamilyBase>& f : families_) families.push_back(f.get());
  }
  std::string out;
  for (const FamilyBase* f : families) f->render(out);
  return out;
}

// ---- text ----

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), v);
  return std::string(buffer, r.ptr);
}

std::string escape_label_value(std::string_view v) {
  return escape_text(v, /*quotes=*/true);
}

}  // namespace k3::gateway
