// A big chunk's pass (chunk_pass.h) runs in parts between the other
// sessions' decode steps (issue 26). PassPacer sets how long each part may
// run; PassProgress counts what the parts moved as prompt tokens read (the
// request's progress and the prefill rate's samples).
#pragma once

#include <cstdint>
#include <optional>

#include "engined/model/chunk_pass.h"
#include "engined/serving/prefill_rate.h"

namespace k3::engined {

// Not thread-safe: the engine loop's thread owns it.
class PassPacer {
 public:
  // A part's budget beside other sessions: kBesideFactor x their step,
  // within [kMinSeconds, kMaxSeconds] (a part takes about its budget, so a
  // decoder waits about two and a half of its own steps); a pass alone runs
  // kAloneSeconds a part, so progress and cancellation are heard each second.
  static constexpr double kBesideFactor = 1.5;
  static constexpr double kMinSeconds = 0.1;
  static constexpr double kMaxSeconds = 2.0;
  static constexpr double kAloneSeconds = 1.0;

  // fixed_seconds > 0: every part's budget (tests set a small one to see
  // many parts); 0: paced as above.
  explicit PassPacer(double fixed_seconds) : fixed_(fixed_seconds) {}

  // The next part's budget, seconds. `beside`: the other sessions' step
  // this round (nullopt: none ran). It follows the smaller of that step and
  // their running mean (weights 0.75 / 0.25), so one slow step (its experts
  // read behind the pass's) does not lengthen the next wait.
  double part_budget(std::optional<double> beside);

 private:
  double fixed_;
  double mean_ = 0;  // the steps' running mean; 0: none yet
};

// One pass's progress. Not thread-safe.
class PassProgress {
 public:
  // The prompt tokens `pass` counts as read: all of them once it is done,
  // else its fraction of the work, short of the last (which comes with the
  // logits).
  static int64_t tokens_read(const ChunkPass& pass);

  // A part of `seconds` after which the pass counts `now` tokens read (from
  // tokens_read): returns the tokens it moved and adds them with the
  // seconds they took to `rate`. A part too short to move a whole token
  // keeps its seconds for the next sample.
  int64_t add_part(int64_t now, double seconds, PrefillRate* rate);
  int64_t done() const { return done_; }
  void reset() { *this = PassProgress(); }

 private:
  int64_t done_ = 0;
  double unrated_seconds_ = 0;
};

}  // namespace k3::engined
