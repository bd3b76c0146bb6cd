#include "frontends/codec/compression.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

TEST(Compression, RoundTripsGzipAndDeflate) {
  const std::string text(10000, 'a');
  for (Encoding e : {Encoding::kGzip, Encoding::kDeflate}) {
    auto packed = Compress(text, e);
    ASSERT_TRUE(packed.ok());
    EXPECT_LT(packed->size(), text.size());
    auto plain = Decompress(*packed, e, 1 << 20);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    EXPECT_EQ(*plain, text);
  }
}

TEST(Compression, BoundsTheInflatedSize) {
  auto bomb = Compress(std::string(1 << 20, 'x'), Encoding::kGzip);
  auto r = Decompress(*bomb, Encoding::kGzip, 1000);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST(Compression, RejectsGarbageAndTruncation) {
  EXPECT_EQ(Decompress("not gzip at all", Encoding::kGzip, 1000).status().code(), StatusCode::kInvalidArgument);
  auto packed = Compress("hello hello hello", Encoding::kGzip);
  EXPECT_FALSE(Decompress(packed->substr(0, packed->size() - 4), Encoding::kGzip, 1000).ok());
}

TEST(Compression, NegotiatesAcceptEncoding) {
  EXPECT_EQ(NegotiateEncoding("gzip, deflate"), Encoding::kGzip);
  EXPECT_EQ(NegotiateEncoding("deflate;q=0.9, gzip;q=0.5"), Encoding::kDeflate);
  EXPECT_EQ(NegotiateEncoding("br"), Encoding::kIdentity);
  EXPECT_EQ(NegotiateEncoding("gzip;q=0"), Encoding::kIdentity);
  EXPECT_FALSE(ParseContentEncoding("br").ok());
  EXPECT_EQ(*ParseContentEncoding("GZIP"), Encoding::kGzip);
}

}  // namespace
}  // namespace inferd
