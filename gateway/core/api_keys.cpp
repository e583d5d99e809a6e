#include "gateway/core/api_keys.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "shared/base/file.h"
#include "shared/rpc/credentials.h"

namespace k3::gateway {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

Status ApiKeys::add_key(std::string_view key, std::string_view origin) {
  if (key.size() < kMinKeyLength) {
    return absl::InvalidArgumentError(cat(origin, ": a key must be at least ", kMinKeyLength,
                                          " characters (this one has ", key.size(), ")"));
  }
  for (const char c : key) {
    const unsigned char u = static_cast<unsigned char>(c);
    // A key travels in an HTTP header: printable ASCII, no spaces.
    if (u <= 0x20 || u >= 0x7f) {
      return absl::InvalidArgumentError(
          cat(origin, ": a key may hold only printable ASCII characters, no spaces"));
    }
  }
  keys_.emplace_back(key);
  return absl::OkStatus();
}

Status ApiKeys::add_file(const std::string& path) {
  // Its group may read it (the service's group, deploy/config/api-keys.example:
  // mode 0640); other users may not.
  StatusOr<std::string> text = base::read_secret_file(path, S_IRWXO);
  if (!text.ok())
    return absl::Status(text.status().code(), cat("api key file ", text.status().message()));
  size_t line_number = 0;
  size_t added = 0;
  for (std::string_view rest = *text; !rest.empty();) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    ++line_number;
    const std::string_view key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    K3_RETURN_IF_ERROR(add_key(key, cat("api key file ", path, " line ", line_number)));
    ++added;
  }
  if (added == 0) {
    return absl::InvalidArgumentError(
        cat("api key file ", path, ": no keys (", line_number, " lines, all blank or comments)"));
  }
  return absl::OkStatus();
}

bool ApiKeys::check_bearer(std::string_view authorization) const {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = authorization[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return false;
  }
  const std::string_view key = authorization.substr(kScheme.size());
  bool found = false;
  for (const std::string& k : keys_) found |= rpc::token_equals(k, key);
  return found;
}

}  // namespace k3::gateway
