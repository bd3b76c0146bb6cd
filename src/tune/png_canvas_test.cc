#include "tune/png_canvas.h"

#include <gtest/gtest.h>
#include <zlib.h>

namespace inferd::tune {
namespace {

uint32_t PngU32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) | static_cast<uint8_t>(s[at + 3]);
}

// The PNG's chunks checked (lengths, CRCs) and its pixels inflated back.
std::string DecodePng(const std::string& png, uint32_t* w, uint32_t* h) {
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::string idat;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t len = PngU32(png, at);
    const std::string type = png.substr(at + 4, 4);
    const std::string body = png.substr(at + 4, 4 + len);
    EXPECT_EQ(PngU32(png, at + 8 + len),
              crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())))
        << type;
    if (type == "IHDR") {
      *w = PngU32(png, at + 8);
      *h = PngU32(png, at + 12);
      EXPECT_EQ(png[at + 16], 8);  // bit depth
      EXPECT_EQ(png[at + 17], 2);  // RGB
    }
    if (type == "IDAT") idat += png.substr(at + 8, len);
    if (type == "IEND") EXPECT_EQ(at + 12, png.size());
    at += 12 + len;
  }
  std::string raw(static_cast<size_t>(*h) * (1 + *w * 3), '\0');
  uLongf size = raw.size();
  EXPECT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &size, reinterpret_cast<const Bytef*>(idat.data()),
                       static_cast<uLong>(idat.size())),
            Z_OK);
  EXPECT_EQ(size, raw.size());
  return raw;
}

TEST(PngCanvasTest, EncodesWhatWasDrawn) {
  Canvas c(40, 30, {255, 255, 255});
  c.FillRect(10, 5, 12, 7, {200, 0, 0});
  c.Line(0, 29, 39, 29, {0, 0, 255});
  c.Set(-1, 100, {1, 2, 3});  // outside: ignored
  uint32_t w = 0, h = 0;
  const std::string raw = DecodePng(c.EncodePng(), &w, &h);
  ASSERT_EQ(w, 40u);
  ASSERT_EQ(h, 30u);
  auto px = [&](int x, int y) {
    const size_t i = static_cast<size_t>(y) * (1 + w * 3) + 1 + static_cast<size_t>(x) * 3;
    return Rgb{static_cast<uint8_t>(raw[i]), static_cast<uint8_t>(raw[i + 1]), static_cast<uint8_t>(raw[i + 2])};
  };
  EXPECT_EQ(px(11, 6), (Rgb{200, 0, 0}));
  EXPECT_EQ(px(20, 29), (Rgb{0, 0, 255}));
  EXPECT_EQ(px(0, 0), (Rgb{255, 255, 255}));
}

TEST(PngCanvasTest, TextInksKnownGlyphsOnly) {
  Canvas c(60, 10, {255, 255, 255});
  EXPECT_EQ(c.Text(0, 0, "1", {0, 0, 0}), 6);
  // The digit one's stem: column 2 of rows 0..6.
  for (int y = 0; y < 7; ++y) EXPECT_EQ(c.At(2, y), (Rgb{0, 0, 0})) << y;
  Canvas blank(60, 10, {255, 255, 255});
  blank.Text(0, 0, "~ ~", {0, 0, 0});  // no glyphs: nothing inked
  for (int y = 0; y < 10; ++y)
    for (int x = 0; x < 60; ++x) EXPECT_EQ(blank.At(x, y), (Rgb{255, 255, 255}));
  EXPECT_EQ(Canvas::TextWidth("abc", 2), 36);
}

TEST(PngCanvasTest, DashedLinesLeaveGaps) {
  Canvas c(20, 1, {255, 255, 255});
  c.Line(0, 0, 19, 0, {0, 0, 0}, 4);
  EXPECT_EQ(c.At(0, 0), (Rgb{0, 0, 0}));
  EXPECT_EQ(c.At(5, 0), (Rgb{255, 255, 255}));
  EXPECT_EQ(c.At(9, 0), (Rgb{0, 0, 0}));
}

}  // namespace
}  // namespace inferd::tune
