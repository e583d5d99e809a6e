// The web chat page's files, embedded into the binary at build time
// (gateway/web/assets.cmake): the page's own (gateway/web/) and the libraries
// it uses from Debian's packages (served under "lib/"). gateway/web/embed.cmake
// generates the definitions of web_page_assets() and web_library_assets().
#pragma once

#include <span>
#include <string_view>

namespace k3::gateway {

struct WebAsset {
  std::string_view
      name;  // served name under /web/: "app.mjs", "lib/fonts/KaTeX_Main-Regular.woff2"
  std::string_view body;  // the file's bytes
};

// The page's own files, in a fixed order; the storage is static.
std::span<const WebAsset> web_page_assets();
// The libraries' files ("lib/..."), in a fixed order; the storage is static.
std::span<const WebAsset> web_library_assets();
// Both, the page's first; the storage is static (thread-safe).
std::span<const WebAsset> web_assets();

}  // namespace k3::gateway
