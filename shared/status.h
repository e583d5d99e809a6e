// Status helpers. absl::Status codes are gRPC's codes, so a Status crosses the
// gRPC boundary unchanged (shared/rpc/server.h: to_grpc).
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace k3 {

using absl::Status;
using absl::StatusOr;

// Debian's abseil has its own absl::string_view (not std::string_view), which
// absl::StrCat insists on. k3::cat concatenates both kinds of string views,
// strings and numbers (numbers formatted as absl::StrCat does).
namespace detail {
inline void cat_one(std::string& out, std::string_view s) {
  out.append(s);
}
inline void cat_one(std::string& out, absl::string_view s) {
  out.append(s.data(), s.size());
}
inline void cat_one(std::string& out, const std::string& s) {
  out.append(s);
}
inline void cat_one(std::string& out, const char* s) {
  out.append(s);
}
inline void cat_one(std::string& out, char c) {
  out.push_back(c);
}
template <typename T>
requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool> &&
         !std::is_same_v<T, char>) inline void cat_one(std::string& out, T v) {
  absl::StrAppend(&out, v);
}
}  // namespace detail

template <typename... Args>
std::string cat(const Args&... args) {
  std::string out;
  (detail::cat_one(out, args), ...);
  return out;
}

// A Status message as a std::string (for logging and comparisons).
inline std::string msg(const absl::Status& s) {
  return std::string(s.message());
}

}  // namespace k3

#define K3_CONCAT_INNER(a, b) a##b
#define K3_CONCAT(a, b) K3_CONCAT_INNER(a, b)

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define K3_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status k3_status_ = (expr);      \
    if (!k3_status_.ok()) return k3_status_; \
  } while (0)

// `lhs = value of expr` (a StatusOr), or returns its error.
#define K3_ASSIGN_OR_RETURN(lhs, expr) \
  K3_ASSIGN_OR_RETURN_IMPL(K3_CONCAT(k3_statusor_, __LINE__), lhs, expr)
#define K3_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
