#include "engined/serving/request_handle.h"

#include <chrono>

#include "shared/api/request_limits.h"

namespace k3::engined {

bool RequestHandle::next(ServeEvent* out, int timeout_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return !events_.empty(); }))
    return false;
  *out = std::move(events_.front());
  events_.pop_front();
  return true;
}

void RequestHandle::push(ServeEvent e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

Status check_request(const Model& model, int sessions, ServeRequest* request) {
  if (request->prompt.empty()) return absl::InvalidArgumentError("empty prompt: no token ids");
  K3_RETURN_IF_ERROR(model.check_ids(request->prompt));
  const int64_t limit = model.options().max_context;
  if (static_cast<int64_t>(request->prompt.size()) >= limit)
    return absl::OutOfRangeError(cat("prompt of ", request->prompt.size(),
                                     " tokens leaves no room in the context of ", limit));
  if (request->max_tokens < 0) return absl::InvalidArgumentError("max_tokens must be >= 0");
  if (request->think_budget < 0) return absl::InvalidArgumentError("think_budget must be >= 0");
  if ((request->think_budget > 0 || request->constraint_think_only) && !request->constraint)
    return absl::InvalidArgumentError(
        "a think budget needs an output constraint that opens with the think channel");
  if (request->top_logprobs < 0 || request->top_logprobs > api::kMaxTopLogprobs)
    return absl::InvalidArgumentError(
        cat("top_logprobs ", request->top_logprobs, " is outside [0, ", api::kMaxTopLogprobs, "]"));
  if (request->sampling.top_p == 0) request->sampling.top_p = 1;  // 0 = off, as 1
  K3_RETURN_IF_ERROR(api::validate_sampling(to_wire(request->sampling), model.config().vocab_size));
  if (request->expert_top_p == 0) request->expert_top_p = model.options().expert_top_p;
  if (!(request->expert_top_p > 0 && request->expert_top_p <= 1))
    return absl::InvalidArgumentError(
        cat("expert_top_p must be in (0, 1], not ", request->expert_top_p));
  if (request->n < 1 || request->n > api::kMaxChoices)
    return absl::InvalidArgumentError(
        cat("n (choices) is ", request->n, ", outside [1, ", api::kMaxChoices, "]"));
  if (request->n > sessions)
    return absl::InvalidArgumentError(cat("n (choices) is ", request->n, " but this engined has ",
                                          sessions, " sessions (one per choice)"));
  return absl::OkStatus();
}

}  // namespace k3::engined
