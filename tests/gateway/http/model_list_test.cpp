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

// Every served name, each with max_model_len as an integer once known.
TEST(Responses, ModelsUnderEveryNameWithMaxModelLen) {
  const json list = models_json(model_entries({"kimi-k3", "k3"}, 100, 131072));
  EXPECT_EQ(list, json::parse(R"({"object": "list", "data": [
      {"id": "kimi-k3", "object": "model", "created": 100, "owned_by": "k3serve",
       "max_model_len": 131072},
      {"id": "k3", "object": "model", "created": 100, "owned_by": "k3serve",
       "max_model_len": 131072}]})"));
  EXPECT_TRUE(list["data"][0]["max_model_len"].is_number_integer());
  // Not known yet (engined has not answered): left out, never 0 or null.
  EXPECT_FALSE(model_json({"k3", 1, "k3serve", 0}).contains("max_model_len"));
}

}  // namespace
}  // namespace k3::gateway
