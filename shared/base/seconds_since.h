// Elapsed wall time on the steady clock, in seconds (the loops' and the
// passes' own timing).
#pragma once

#include <chrono>

namespace k3::base {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace k3::base
