// The web chat page's files (gateway/web/), embedded into the binary at build
// time: gateway/web/embed.cmake generates the definition of web_assets().
#pragma once

#include <span>
#include <string_view>

namespace k3::gateway {

struct WebAsset {
  std::string_view name;  // file name in gateway/web/ ("app.mjs")
  std::string_view body;  // the file's bytes
};

// Every embedded file, in a fixed order; the storage is static.
std::span<const WebAsset> web_assets();

}  // namespace k3::gateway
