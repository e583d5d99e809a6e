// What `k3ctl chat` shows while a reply has no text yet: the gateway's
// Progress events (waiting for admission, reading the prompt) in the web
// page's words (gateway/web/progress.mjs): "waiting in line (2 ahead)",
// "reading your prompt: 3,200 of 10,000 tokens, about 14 min left". At the
// real model's speed a long prompt takes minutes to hours to read; this line
// tells a slow service from a dead one.
#pragma once

#include <cstdint>
#include <string>

#include "k3serve/v1/gateway.pb.h"

namespace k3::tools {

// 10000 -> "10,000".
std::string format_count(uint64_t n);
// A time left as a person reads it: "45 s" under a minute, "14 min" under an
// hour (never "0 min"), then "2 h 5 min" (or "3 h").
std::string format_duration(double seconds);
// The words for `p` (docs/openai-api.md, "Streams"): queued when
// p.queued() > 0 (the place in line, 1 = next to run), "starting" before
// engined's first report (0 of 0), else the prompt's reading (the time left
// only while some is left and engined has measured a rate: eta_s >= 0).
std::string progress_text(const k3serve::v1::Progress& p);

// The progress line of one reply. On a terminal it is a single dim line
// rewritten in place and erased before the reply's first text (`columns`
// wide at most, so it never wraps: erasing clears one row only); elsewhere
// each new text is a line of its own. Returns the bytes to write; the caller
// writes them to stdout on a terminal, to stderr otherwise. Not thread-safe.
class ProgressLine {
 public:
  // columns <= 0: width unknown (no cut).
  ProgressLine(bool tty, int columns) : tty_(tty), columns_(columns) {}

  // Shows `text` in place of what is shown; "" when it is shown already.
  std::string show(const std::string& text);
  // Erases the line shown on a terminal ("" when none, or not a terminal).
  std::string clear();
  // Whether a line is on the terminal now.
  bool shown() const { return tty_ && !shown_.empty(); }

 private:
  const bool tty_;
  const int columns_;
  std::string shown_;  // the text last shown ("" after clear)
};

}  // namespace k3::tools
