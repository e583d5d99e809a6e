#include "gateway/http/field_reader.h"

#include <utility>

#include "gateway/core/json_text.h"

namespace k3::gateway {

using nlohmann::ordered_json;

Status invalid(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

StatusOr<ordered_json> parse_body(std::string_view body) {
  K3_ASSIGN_OR_RETURN(ordered_json request, parse_json_text(body, ""));
  if (!request.is_object()) return invalid("the request body must be a JSON object");
  return request;
}

}  // namespace k3::gateway
