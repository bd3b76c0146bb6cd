// A small RGB canvas for `inferd tune`'s plot: points, lines, rectangles,
// text in a built-in 5x7 font (digits, capitals and a few signs; other
// characters draw as blanks), and PNG encoding over zlib (filter 0, one IDAT).
// No image library: Debian's libpng is not linked for one chart.
//
// Thread-safety: a value; one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace inferd::tune {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);
  int width() const { return width_; }
  int height() const { return height_; }
  Rgb At(int x, int y) const;
  void Set(int x, int y, Rgb c);  // outside: ignored
  void FillRect(int x0, int y0, int x1, int y1, Rgb c);
  // `dash` > 0: on and off runs of that many pixels.
  void Line(int x0, int y0, int x1, int y1, Rgb c, int dash = 0);
  // Top-left at (x, y); `scale` pixels per font pixel. Returns the width drawn.
  int Text(int x, int y, const std::string& text, Rgb c, int scale = 1);
  static int TextWidth(const std::string& text, int scale = 1) { return static_cast<int>(text.size()) * 6 * scale; }
  // The PNG file's bytes (8-bit RGB).
  std::string EncodePng() const;

 private:
  int width_, height_;
  std::vector<uint8_t> pixels_;  // RGB rows
};

}  // namespace inferd::tune
