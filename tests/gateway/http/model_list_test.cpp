// gateway/http/model_list.h: GET /v1/models' list object.
#include "gateway/http/model_list.h"

#include "gtest/gtest.h"

namespace k3::gateway {
namespace {

using nlohmann::json;

TEST(Responses, Models) {
  EXPECT_EQ(models_json({{"k3", 100, "k3serve"}}), json::parse(R"({"object": "list", "data": [
      {"id": "k3", "object": "model", "created": 100, "owned_by": "k3serve"}]})"));
  EXPECT_EQ(models_json({}), json::parse(R"({"object": "list", "data": []})"));
}

}  // namespace
}  // namespace k3::gateway
