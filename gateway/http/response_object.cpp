#include "gateway/http/response_object.h"

namespace k3::gateway {

using nlohmann::json;

json base_object(std::string_view id, int64_t created, std::string_view model,
                 std::string_view object) {
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}

json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
          {"k3_restored_tokens", usage.restored_tokens}};
}

json usage_chunk_json(std::string_view id, int64_t created, std::string_view model,
                      const Usage& usage, bool chat) {
  json out = base_object(id, created, model, chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return out;
}

}  // namespace k3::gateway
