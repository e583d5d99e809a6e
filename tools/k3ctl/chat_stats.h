// /stats of `k3ctl chat`: token counts and times of the last reply and of
// the session.
#pragma once

#include <cstdint>
#include <string>

#include "k3serve/v1/gateway.pb.h"
#include "tools/k3ctl/gateway_client.h"

namespace k3::tools {

// Not thread-safe.
class ChatStats {
 public:
  // A completed reply that took `seconds` from request to end, its first piece
  // after `first_s` (negative: nothing arrived).
  void add(const ChatReply& reply, double first_s, double seconds);
  void add_cancelled() { ++cancelled_; }
  // The /stats text: a line for the last reply and one for the session.
  std::string text() const;

 private:
  struct Turn {
    k3serve::v1::Usage usage;
    double first_s = -1;
    double seconds = 0;
  };
  Turn last_;
  bool has_last_ = false;
  int turns_ = 0;
  int cancelled_ = 0;
  uint64_t prompt_ = 0, completion_ = 0;
  double generating_s_ = 0;
};

}  // namespace k3::tools
