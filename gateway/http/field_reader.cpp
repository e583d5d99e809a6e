#include "gateway/http/field_reader.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "gateway/core/json_text.h"
#include "gateway/core/status_codes.h"
#include "shared/base/log.h"

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

StatusOr<std::vector<std::string>> UnknownFields::unknown_keys(
    const ordered_json& obj, const std::vector<std::string_view>& known, std::string_view kind,
    std::string_view where) {
  std::vector<std::string> unknown;
  if (!obj.is_object()) return unknown;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it.value().is_null()) continue;
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    const std::string path = cat(where, it.key());
    if (policy_ == UnknownFieldPolicy::kRefuse)
      return with_param(invalid(cat("'", path, "' is not a supported field (", doc_,
                                    " lists the fields of ", kind, ")")),
                        path);
    unknown.push_back(it.key());
    const bool echoed =
        !where.empty() && std::find(std::begin(kEchoedFieldNames), std::end(kEchoedFieldNames),
                                    it.key()) != std::end(kEchoedFieldNames);
    if (!echoed) ignored_.push_back(path);
  }
  return unknown;
}

Status UnknownFields::check(ordered_json& obj, const std::vector<std::string_view>& known,
                            std::string_view kind, std::string_view where) {
  K3_ASSIGN_OR_RETURN(std::vector<std::string> unknown, unknown_keys(obj, known, kind, where));
  for (const std::string& key : unknown) obj.erase(key);
  return absl::OkStatus();
}

Status UnknownFields::check_read_only(const ordered_json& obj,
                                      const std::vector<std::string_view>& known,
                                      std::string_view kind, std::string_view where) {
  return unknown_keys(obj, known, kind, where).status();
}

std::string UnknownFields::header_value() const {
  std::string out;
  for (const std::string& path : ignored_) {
    std::string item;
    for (unsigned char c : path) {
      if (c < 0x20 || c > 0x7e || c == ',' || c == '%') {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", c);
        item += hex;
      } else {
        item += static_cast<char>(c);
      }
    }
    if (out.size() + item.size() + 1 > kMaxHeaderBytes) return out + (out.empty() ? "..." : ",...");
    out += cat(out.empty() ? "" : ",", item);
  }
  return out;
}

void name_ignored_fields(const HttpRequest& request, const UnknownFields& unknown,
                         HttpResponse& reply) {
  if (unknown.ignored().empty()) return;
  const std::string value = unknown.header_value();
  base::logger("gateway")->warn("[{}] {} ignored fields: {}", request.request_id, request.path,
                                value);
  reply.headers.emplace_back(std::string(kIgnoredFieldsHeader), value);
}

}  // namespace k3::gateway
