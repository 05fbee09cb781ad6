#include "stoker/status.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  STOKER_ASSIGN_OR_RETURN(int h, Half(x));
  STOKER_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::OK();
}

TEST(Status, CodesAndMessages) {
  EXPECT_TRUE(Status::OK().ok());
  Status s = Status::IOError("mmap of 4096 bytes", 12);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.ToString().find("mmap of 4096 bytes"), std::string::npos);
  EXPECT_NE(s.ToString().find("errno 12"), std::string::npos);
  EXPECT_TRUE(Status::Closed("x").IsClosed());
  EXPECT_TRUE(Status::Timeout("x").IsTimeout());
}

TEST(Result, PropagatesErrors) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

}  // namespace
}  // namespace stoker
