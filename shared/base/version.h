#pragma once

namespace k3::base {
inline constexpr const char* kVersion = "0.1.0";
}
