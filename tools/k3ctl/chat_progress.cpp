#include "tools/k3ctl/chat_progress.h"

#include <algorithm>
#include <cmath>

#include "shared/status.h"

namespace k3::tools {
namespace {

constexpr std::string_view kEraseLine = "\r\x1b[2K";  // to column 0, erase the row
constexpr std::string_view kDim = "\x1b[2m";
constexpr std::string_view kResetStyle = "\x1b[0m";

}  // namespace

std::string format_count(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_duration(double seconds) {
  // Rounded as the page rounds (Math.round: halves up).
  const double s = std::max(1.0, std::isfinite(seconds) ? std::floor(seconds + 0.5) : 1.0);
  if (s < 60) return cat(static_cast<int64_t>(s), " s");
  const int64_t minutes = static_cast<int64_t>(std::floor(s / 60 + 0.5));
  if (minutes < 60) return cat(minutes, " min");
  const int64_t h = minutes / 60, m = minutes % 60;
  return m == 0 ? cat(h, " h") : cat(h, " h ", m, " min");
}

std::string progress_text(const k3serve::v1::Progress& p) {
  if (p.queued() == 1) return "waiting in line (next)";
  if (p.queued() > 1) return cat("waiting in line (", format_count(p.queued() - 1), " ahead)");
  if (p.total() == 0) return "starting";
  std::string text = cat("reading your prompt: ", format_count(p.done()), " of ",
                         format_count(p.total()), " tokens");
  if (p.done() < p.total() && std::isfinite(p.eta_s()) && p.eta_s() >= 0)
    text += cat(", about ", format_duration(p.eta_s()), " left");
  return text;
}

std::string ProgressLine::show(const std::string& text) {
  if (text.empty() || text == shown_) return "";
  shown_ = text;
  if (!tty_) return cat("[", text, "]\n");
  std::string visible = text;
  // Every character of the text is ASCII: one column each.
  if (columns_ > 1 && visible.size() > static_cast<size_t>(columns_ - 1))
    visible.resize(static_cast<size_t>(columns_ - 1));
  return cat(kEraseLine, kDim, visible, kResetStyle);
}

std::string ProgressLine::clear() {
  const bool was_shown = shown();
  shown_.clear();
  return was_shown ? std::string(kEraseLine) : std::string();
}

}  // namespace k3::tools
