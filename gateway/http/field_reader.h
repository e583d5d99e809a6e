// Reading an OpenAI request body's JSON: the body as an object, and its
// optional fields by type, each error naming the field with its path. The
// chat and completion parsers (chat_protocol.h, completion_protocol.h) and
// the fields they share (common_fields.h) read through it.
//
// Thread-safe (no shared state); a FieldReader only borrows its object.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "shared/status.h"

namespace k3::gateway {

// InvalidArgument with `message`: what every refused field gets.
Status invalid(std::string message);

// `body` parsed (depth-limited, ordered: tool-call arguments keep their key
// order into the prompt); InvalidArgument unless it is a JSON object.
StatusOr<nlohmann::ordered_json> parse_body(std::string_view body);

// Reads the optional fields of one JSON object; absent and null are the
// same. Type errors name the field with its path ("'stream_options.x'").
class FieldReader {
 public:
  FieldReader(const nlohmann::ordered_json& object, std::string prefix = "")
      : object_(object), prefix_(std::move(prefix)) {}

  const nlohmann::ordered_json* get(std::string_view key) const {
    auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  // "'prefix.key'", for messages.
  std::string name(std::string_view key) const { return cat("'", prefix_, key, "'"); }

  StatusOr<std::optional<std::string>> string(std::string_view key) const {
    const nlohmann::ordered_json* v = get(key);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string()) return invalid(cat(name(key), " must be a string"));
    return std::optional<std::string>(v->get<std::string>());
  }

  StatusOr<std::optional<bool>> boolean(std::string_view key) const {
    const nlohmann::ordered_json* v = get(key);
    if (v == nullptr) return std::optional<bool>();
    if (!v->is_boolean()) return invalid(cat(name(key), " must be a boolean"));
    return std::optional<bool>(v->get<bool>());
  }

  StatusOr<std::optional<double>> number(std::string_view key) const {
    const nlohmann::ordered_json* v = get(key);
    if (v == nullptr) return std::optional<double>();
    if (!v->is_number()) return invalid(cat(name(key), " must be a number"));
    return std::optional<double>(v->get<double>());
  }

  // An integer; unsigned values beyond int64 are clamped to its maximum.
  StatusOr<std::optional<int64_t>> integer(std::string_view key) const {
    const nlohmann::ordered_json* v = get(key);
    if (v == nullptr) return std::optional<int64_t>();
    if (!v->is_number_integer()) return invalid(cat(name(key), " must be an integer"));
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::optional<int64_t>(std::numeric_limits<int64_t>::max());
    }
    return std::optional<int64_t>(v->get<int64_t>());
  }

  // An integer >= 1.
  StatusOr<std::optional<int64_t>> count(std::string_view key) const {
    K3_ASSIGN_OR_RETURN(std::optional<int64_t> v, integer(key));
    if (v.has_value() && *v < 1) return invalid(cat(name(key), " must be at least 1"));
    return v;
  }

  // A nested object's fields, or nullopt when absent.
  StatusOr<std::optional<FieldReader>> object(std::string_view key) const {
    const nlohmann::ordered_json* v = get(key);
    if (v == nullptr) return std::optional<FieldReader>();
    if (!v->is_object()) return invalid(cat(name(key), " must be an object"));
    return std::optional<FieldReader>(FieldReader(*v, cat(prefix_, key, ".")));
  }

 private:
  const nlohmann::ordered_json& object_;
  std::string prefix_;
};

}  // namespace k3::gateway
