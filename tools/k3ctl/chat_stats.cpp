#include "tools/k3ctl/chat_stats.h"

#include <algorithm>
#include <cstdio>

#include "shared/status.h"

namespace k3::tools {
namespace {

std::string seconds_text(double s) {
  if (s < 0) return "- s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::string rate_text(uint64_t tokens, double seconds) {
  if (seconds <= 0 || tokens == 0) return "- tokens/s";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f tokens/s", static_cast<double>(tokens) / seconds);
  return buf;
}

}  // namespace

void ChatStats::add(const ChatReply& reply, double first_s, double seconds) {
  last_ = Turn{reply.done.usage(), first_s, seconds};
  has_last_ = true;
  ++turns_;
  prompt_ += last_.usage.prompt_tokens();
  completion_ += last_.usage.completion_tokens();
  // Decode speed: from the first piece to the end.
  generating_s_ += std::max(0.0, seconds - std::max(0.0, first_s));
}

std::string ChatStats::text() const {
  std::string out;
  if (!has_last_) {
    out = "no reply yet\n";
  } else {
    const k3serve::v1::Usage& u = last_.usage;
    out = cat("last reply: prompt ", u.prompt_tokens(), " tokens (cached ", u.cached_tokens(),
              ", restored ", u.restored_tokens(), "), completion ", u.completion_tokens(),
              " tokens; first token after ", seconds_text(last_.first_s), ", ",
              rate_text(u.completion_tokens(), last_.seconds - std::max(0.0, last_.first_s)), ", ",
              seconds_text(last_.seconds), " in all\n");
  }
  out += cat("session: replies ", turns_, " (cancelled ", cancelled_, "), prompt ", prompt_,
             " tokens, completion ", completion_, " tokens, ",
             rate_text(completion_, generating_s_), " while generating\n");
  return out;
}

}  // namespace k3::tools
