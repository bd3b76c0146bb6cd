#include <gtest/gtest.h>

#include "frontends/grpc/services.h"

namespace inferd::grpcfe {
namespace {

TEST(GrpcStatus, EveryFacadeCodeMapsToItsGrpcCodeWithTheMessage) {
  const std::vector<std::pair<Status, grpc::StatusCode>> cases = {
      {Status::InvalidArgument("a"), grpc::StatusCode::INVALID_ARGUMENT},
      {Status::NotFound("b"), grpc::StatusCode::NOT_FOUND},
      {Status::Unavailable("c"), grpc::StatusCode::UNAVAILABLE},
      {Status::Internal("d"), grpc::StatusCode::INTERNAL},
      {Status::Unimplemented("e"), grpc::StatusCode::UNIMPLEMENTED},
      {Status::DeadlineExceeded("f"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {Status::FailedPrecondition("g"), grpc::StatusCode::FAILED_PRECONDITION},
      {Status::ResourceExhausted("h"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {Status::AlreadyExists("i"), grpc::StatusCode::ALREADY_EXISTS},
      {Status::Cancelled("j"), grpc::StatusCode::CANCELLED},
      {Status::Unauthenticated("k"), grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& [st, code] : cases) {
    const grpc::Status g = ToGrpcStatus(st);
    EXPECT_EQ(g.error_code(), code) << st.ToString();
    EXPECT_EQ(g.error_message(), st.message());
  }
  EXPECT_TRUE(ToGrpcStatus(Status::OK()).ok());
}

}  // namespace
}  // namespace inferd::grpcfe
