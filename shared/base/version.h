#pragma once

namespace k3 {
inline constexpr const char* kVersion = "0.1.0";
}
