#include "gateway/http/web_assets.h"

#include <vector>

namespace k3::gateway {

std::span<const WebAsset> web_assets() {
  static const std::vector<WebAsset> kAll = [] {
    std::vector<WebAsset> all(web_page_assets().begin(), web_page_assets().end());
    all.insert(all.end(), web_library_assets().begin(), web_library_assets().end());
    return all;
  }();
  return kAll;
}

}  // namespace k3::gateway
