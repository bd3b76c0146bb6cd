#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

namespace inferd {
namespace {

TEST(Tensor, ValidateChecksBytesAgainstShape) {
  std::byte* p;
  Tensor t = Tensor::Allocate("a", DataType::kInt32, {2, 3}, 24, &p);
  EXPECT_TRUE(t.Validate().ok());
  t.byte_size = 20;
  EXPECT_FALSE(t.Validate().ok());
  // 2^61 FP64 elements would be 2^64 bytes: must not wrap around to 0.
  Tensor huge;
  huge.name = "h";
  huge.dtype = DataType::kFp64;
  huge.shape = {int64_t{1} << 61};
  huge.byte_size = 0;
  EXPECT_FALSE(huge.Validate().ok());
}

TEST(Tensor, BytesElementsAndSlices) {
  std::string buf;
  for (const char* s : {"a", "bcd", "", "ef"}) AppendBytesElement(&buf, std::string_view(s));
  Tensor t = Tensor::Copy("s", DataType::kBytes, {2, 2},
                          std::span<const std::byte>(reinterpret_cast<const std::byte*>(buf.data()), buf.size()));
  ASSERT_TRUE(t.Validate().ok());
  auto row1 = t.SliceRows(1, 1);
  ASSERT_TRUE(row1.ok());
  auto elems = SplitBytesElements(row1->bytes());
  ASSERT_TRUE(elems.ok());
  EXPECT_EQ(*elems, (std::vector<std::string_view>{"", "ef"}));
  Tensor bad = t;
  bad.shape = {5};
  EXPECT_FALSE(bad.Validate().ok());
  EXPECT_FALSE(
      SplitBytesElements(std::span<const std::byte>(reinterpret_cast<const std::byte*>("\x05\0\0\0ab"), 6)).ok());
}

TEST(Tensor, ConcatAndSliceRoundTrip) {
  int32_t a[2] = {1, 2}, b[4] = {3, 4, 5, 6};
  Tensor ta = Tensor::Copy("x", DataType::kInt32, {1, 2}, std::as_bytes(std::span(a)));
  Tensor tb = Tensor::Copy("x", DataType::kInt32, {2, 2}, std::as_bytes(std::span(b)));
  auto c = ConcatRows({&ta, &tb}, "x");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->shape, (Shape{3, 2}));
  auto s = c->SliceRows(1, 2);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->as<int32_t>()[0], 3);
  EXPECT_EQ(s->byte_size, 16u);
  Tensor other = Tensor::Copy("x", DataType::kInt32, {1, 1}, std::as_bytes(std::span(a, 1)));
  EXPECT_FALSE(ConcatRows({&ta, &other}, "x").ok());
}

TEST(DataType, WireNamesAndHalfConversions) {
  EXPECT_EQ(*DataTypeFromWire("FP32"), DataType::kFp32);
  EXPECT_FALSE(DataTypeFromWire("FLOAT").has_value());
  EXPECT_EQ(DataTypeToConfig(DataType::kBytes), "TYPE_STRING");
  for (float f : {0.f, 1.f, -2.5f, 65504.f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.5f)), 1.5f);
}

}  // namespace
}  // namespace inferd
