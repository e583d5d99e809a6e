// The API keys the gateway accepts (`Authorization: Bearer KEY` over HTTP,
// the same in gRPC metadata). Loaded at start-up from a key file and/or a
// list; with none configured the API is open (enabled() is false).
//
// Thread safety: load first, then check_bearer from any thread (const, no
// shared mutable state).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace k3::gateway {

class ApiKeys {
 public:
  // Keys shorter than this are refused: a short key is guessable.
  static constexpr size_t kMinKeyLength = 16;

  // A key file: one key per line; blank lines and lines starting with '#'
  // (after leading blanks) are skipped; surrounding spaces, tabs and a
  // trailing '\r' are trimmed. A missing or unreadable file, a file with no
  // keys, or a bad key is an error naming the file (and the line); the key
  // itself is never put in a message.
  Status add_file(const std::string& path);
  // One key (from a flag or a config list); `origin` names it in errors.
  Status add_key(std::string_view key, std::string_view origin = "api key");

  bool enabled() const { return !keys_.empty(); }
  size_t size() const { return keys_.size(); }

  // True when `authorization` (the header's value) is "Bearer KEY" (scheme
  // case-insensitive, one space) and KEY is a configured key. Compares
  // against every key, each over its full length, without early exit, so the
  // time does not tell how much of a guess was right or which key matched.
  // False when no key is configured.
  bool check_bearer(std::string_view authorization) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace k3::gateway
