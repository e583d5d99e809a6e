#include "engined/serving/think_budget.h"

#include <algorithm>

#include "shared/grammar/output_forms.h"

namespace k3::engined {
namespace {

// The control tokens of the closing sequence (4).
int closing_controls() {
  int n = 0;
  for (int sym : grammar::markup_symbols(grammar::think_close_markup()))
    n += sym >= grammar::kSymOpen;
  return n;
}

}  // namespace

ThinkBudget::ThinkBudget(int64_t budget) : budget_(budget) {
  static const int kClosingControls = closing_controls();
  closing_controls_left_ = kClosingControls;
}

int64_t ThinkBudget::bound(const grammar::Constraint& c, const grammar::ConstraintState& st,
                           int64_t remaining) {
  if (budget_ <= 0 || !open()) return remaining;
  const int64_t d = c.matcher().distance(st.state());
  if (rest_ < 0) rest_ = d;  // the first token: the start state, think text at rest
  const int64_t think = grammar::sat_add(std::max<int64_t>(budget_ - thinking_, 0), rest_);
  return remaining < d ? think : std::min(remaining, think);
}

void ThinkBudget::accept(int32_t id, const grammar::VocabIndex& vocab) {
  if (!open()) return;
  if (vocab.control_symbol(id) < 0) {
    if (!closing_) ++thinking_;
    return;
  }
  closing_ = true;
  --closing_controls_left_;
}

}  // namespace k3::engined
