// gateway/http/api_errors.h: OpenAI's error object (message, type, param,
// code) for a Status, 413 included.
#include "gateway/http/api_errors.h"

#include <string>

#include "absl/strings/cord.h"
#include "gateway/core/status_codes.h"
#include "gateway/http/chat_protocol.h"
#include "gtest/gtest.h"

namespace k3::gateway {
namespace {

using nlohmann::json;

TEST(Errors, PayloadTooLarge) {
  const Status s = payload_too_large("body over 1 MiB");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);  // what gRPC sees
  EXPECT_EQ(http_status(s), 413);
  EXPECT_EQ(error_json(s), json::parse(R"({"error": {"message": "body over 1 MiB",
      "type": "invalid_request_error", "param": null, "code": "payload_too_large"}})"));
  // A payload that is not an HTTP error code is ignored.
  Status odd = absl::NotFoundError("x");
  odd.SetPayload("k3.http", absl::Cord("abc"));
  EXPECT_EQ(http_status(odd), 404);
  odd.SetPayload("k3.http", absl::Cord("200"));
  EXPECT_EQ(http_status(odd), 404);
}

TEST(Errors, ErrorJson) {
  EXPECT_EQ(error_json(absl::InvalidArgumentError("'n' must be 1")),
            json::parse(R"({"error": {"message": "'n' must be 1",
                "type": "invalid_request_error", "param": null, "code": "invalid_argument"}})"));
  // An error about a field names it in `param` (OpenAI's shape).
  auto n_error = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}], "n": 9})");
  ASSERT_FALSE(n_error.ok());
  EXPECT_EQ(error_json(n_error.status())["error"]["param"], "n");
  auto code = [](const Status& s) { return error_json(s)["error"]["code"].get<std::string>(); };
  auto type = [](const Status& s) { return error_json(s)["error"]["type"].get<std::string>(); };
  EXPECT_EQ(code(absl::NotFoundError("m")), "model_not_found");
  EXPECT_EQ(code(absl::OutOfRangeError("m")), "context_length_exceeded");
  EXPECT_EQ(code(absl::ResourceExhaustedError("m")), "rate_limit_exceeded");
  EXPECT_EQ(code(absl::UnauthenticatedError("m")), "invalid_api_key");
  EXPECT_EQ(type(absl::UnauthenticatedError("m")), "invalid_request_error");
  EXPECT_EQ(type(absl::CancelledError("m")), "invalid_request_error");
  EXPECT_EQ(type(absl::UnavailableError("m")), "server_error");
  EXPECT_EQ(type(absl::InternalError("m")), "server_error");
  EXPECT_EQ(code(absl::InternalError("m")), "internal_error");
}

}  // namespace
}  // namespace k3::gateway
