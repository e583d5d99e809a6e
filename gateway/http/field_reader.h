// Reading an OpenAI request body's JSON: the body as an object, its
// optional fields by type, each error naming the field with its path, and
// the policy for fields a request's lists do not have (UnknownFields). The
// chat and completion parsers (chat_protocol.h, completion_protocol.h), the
// fields they share (common_fields.h) and the lists (request_fields.h) read
// through it.
//
// Thread-safe (no shared state); a FieldReader only borrows its object; an
// UnknownFields belongs to one request.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/http/http_message.h"
#include "shared/status.h"

namespace k3::gateway {

// InvalidArgument with `message`: what every refused field gets.
Status invalid(std::string message);

// `body` parsed (depth-limited, ordered: tool-call arguments keep their key
// order into the prompt); InvalidArgument unless it is a JSON object.
StatusOr<nlohmann::ordered_json> parse_body(std::string_view body);

// What a request does with a field its object's list does not have
// (gateway --strict-fields; docs/openai-api.md, "Unknown fields").
enum class UnknownFieldPolicy {
  kIgnore,  // accepted, erased from the body, named in x-k3-ignored-fields
  kRefuse,  // 400 invalid_request_error naming its path (also in `param`)
};

// The response header that names the fields a request's reply ignored.
inline constexpr std::string_view kIgnoredFieldsHeader = "x-k3-ignored-fields";

// The fields of one request that its lists do not have. Paths are written as
// in error messages: keys joined by ".", array elements by "[i]"
// ("messages[0].tool_calls[1].index"). Under kIgnore each such field is
// erased from the body (nothing downstream sees it) and its path recorded,
// except that names clients echo back from replies (kEchoedFieldNames)
// inside a nested object are erased without being recorded. A field whose
// value is null counts as absent: neither recorded nor refused.
class UnknownFields {
 public:
  // Echoed back from OpenAI, Anthropic or LiteLLM replies into the history.
  static constexpr std::string_view kEchoedFieldNames[] = {
      "index", "annotations", "refusal", "audio", "cache_control", "name", "id", "type"};

  // `doc` is the page whose lists a refusal points to.
  explicit UnknownFields(UnknownFieldPolicy policy, std::string_view doc = "docs/openai-api.md")
      : policy_(policy), doc_(doc) {}

  UnknownFieldPolicy policy() const { return policy_; }

  // Checks the keys of `obj` (nothing when it is not an object) against
  // `known`. `where` is its path ending in "." ("" for the body,
  // "messages[0]."); `kind` names its list in the doc, for the refusal.
  Status check(nlohmann::ordered_json& obj, const std::vector<std::string_view>& known,
               std::string_view kind, std::string_view where);

  // As check, but `obj` is left as it is: for parsers that copy the fields
  // they know out of the body into a request of their own (the Responses
  // and Messages parsers), where an unknown field goes nowhere anyway.
  Status check_read_only(const nlohmann::ordered_json& obj,
                         const std::vector<std::string_view>& known, std::string_view kind,
                         std::string_view where);

  // The recorded paths, in the order they were checked (the body's own
  // fields first).
  const std::vector<std::string>& ignored() const { return ignored_; }

  // The header's value: the paths comma-separated, each byte that is not
  // printable ASCII, and each comma or '%', written %XX; at most about
  // kMaxHeaderBytes, then a last item "..." says some were left out.
  std::string header_value() const;
  static constexpr size_t kMaxHeaderBytes = 4096;

 private:
  // The keys of `obj` that `known` does not list (null values skipped),
  // recorded; under kRefuse the first one's refusal.
  StatusOr<std::vector<std::string>> unknown_keys(const nlohmann::ordered_json& obj,
                                                  const std::vector<std::string_view>& known,
                                                  std::string_view kind, std::string_view where);

  UnknownFieldPolicy policy_;
  std::string doc_;
  std::vector<std::string> ignored_;
};

// A request's UnknownFields under gateway --strict-fields (`strict`) or not;
// `doc` lists the route's fields.
inline UnknownFields unknown_fields_for(bool strict, std::string_view doc = "docs/openai-api.md") {
  return UnknownFields(strict ? UnknownFieldPolicy::kRefuse : UnknownFieldPolicy::kIgnore, doc);
}

// Names the fields `unknown` ignored (nothing when none): the
// x-k3-ignored-fields header on `reply` (a whole reply, or a stream's head)
// and one warning line with the request's id and path.
void name_ignored_fields(const HttpRequest& request, const UnknownFields& unknown,
                         HttpResponse& reply);

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
