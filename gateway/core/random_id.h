// Random ids the gateway hands out: request ids ("chatcmpl-...", "cmpl-...")
// and tool-call ids ("call_...").
#pragma once

#include <string>
#include <string_view>

namespace k3::gateway {

// `prefix` and 24 random letters and digits. Thread-safe (a generator per
// thread).
std::string random_id(std::string_view prefix);

}  // namespace k3::gateway
