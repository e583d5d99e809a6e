// gateway/core/status_codes.h: the one Status -> HTTP status map.
#include "gateway/core/status_codes.h"

#include "gtest/gtest.h"

namespace k3::gateway {
namespace {

TEST(Errors, HttpStatus) {
  EXPECT_EQ(http_status(absl::OkStatus()), 200);
  EXPECT_EQ(http_status(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(http_status(absl::OutOfRangeError("x")), 400);
  EXPECT_EQ(http_status(absl::FailedPreconditionError("x")), 400);
  EXPECT_EQ(http_status(absl::UnauthenticatedError("x")), 401);
  EXPECT_EQ(http_status(absl::PermissionDeniedError("x")), 403);
  EXPECT_EQ(http_status(absl::NotFoundError("x")), 404);
  EXPECT_EQ(http_status(absl::AbortedError("x")), 409);
  EXPECT_EQ(http_status(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(http_status(absl::CancelledError("x")), 499);
  EXPECT_EQ(http_status(absl::UnimplementedError("x")), 501);
  EXPECT_EQ(http_status(absl::UnavailableError("x")), 503);
  EXPECT_EQ(http_status(absl::DeadlineExceededError("x")), 504);
  EXPECT_EQ(http_status(absl::InternalError("x")), 500);
  EXPECT_EQ(http_status(absl::UnknownError("x")), 500);
  EXPECT_EQ(http_status(absl::DataLossError("x")), 500);
  EXPECT_EQ(http_status(absl::AlreadyExistsError("x")), 500);
}

}  // namespace
}  // namespace k3::gateway
