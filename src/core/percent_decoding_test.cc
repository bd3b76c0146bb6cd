#include "core/percent_decoding.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

std::string Decoded(std::string_view text, bool plus_is_space) {
  std::string out = ">";
  AppendPercentDecoded(&out, text, plus_is_space);
  return out;
}

TEST(PercentDecoding, DecodesValidEscapesAndKeepsTheRest) {
  EXPECT_EQ(HexDigitValue('7'), 7);
  EXPECT_EQ(HexDigitValue('b'), 11);
  EXPECT_EQ(HexDigitValue('F'), 15);
  EXPECT_EQ(HexDigitValue('g'), -1);
  EXPECT_EQ(Decoded("a%2Fb%20c", false), ">a/b c");
  EXPECT_EQ(Decoded("%e2%82%ac", false), ">\xe2\x82\xac");
  // Incomplete or invalid escapes stay as they are, at the end too.
  EXPECT_EQ(Decoded("100%", false), ">100%");
  EXPECT_EQ(Decoded("%4", false), ">%4");
  EXPECT_EQ(Decoded("%zz%41", false), ">%zzA");
  // '+' is a space in query strings only.
  EXPECT_EQ(Decoded("a+b%2B", true), ">a b+");
  EXPECT_EQ(Decoded("a+b", false), ">a+b");
  EXPECT_EQ(Decoded("", true), ">");
}

}  // namespace
}  // namespace inferd
