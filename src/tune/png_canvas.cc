#include "tune/png_canvas.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>

namespace inferd::tune {

namespace {

// 5x7 glyphs, one string of 7 rows x 5 columns each ('#' = ink).
struct Glyph {
  char c;
  const char* rows;
};
constexpr Glyph kFont[] = {
    {'_', "..............................#####"}, {'0', ".###.#...##..###.#.###..##...#.###."},
    {'1', "..#...##....#....#....#....#...###."}, {'2', ".###.#...#....#...#...#...#...#####"},
    {'3', "#####...#...#.....#.....##...#.###."}, {'4', "...#...##..#.#.#..#.#####...#....#."},
    {'5', "######....####.....#....##...#.###."}, {'6', "..##..#...#....####.#...##...#.###."},
    {'7', "#####....#...#...#...#....#....#..."}, {'8', ".###.#...##...#.###.#...##...#.###."},
    {'9', ".###.#...##...#.####....#...#..##.."}, {'.', "..........................##...##.."},
    {'-', "...............#####..............."}, {'/', ".........#...#...#...#...#........."},
    {'(', "...#...#...#....#....#.....#.....#."}, {')', ".#.....#.....#....#....#...#...#..."},
    {':', "......##...##........##...##......."}, {'%', "##...##..#...#...#...#...#..##...##"},
    {'=', "..........#####.....#####.........."}, {'<', "...#...#...#...#.....#.....#.....#."},
    {'$', "..#...#####.#...###...#.#####...#.."}, {'A', ".###.#...##...#######...##...##...#"},
    {'B', "####.#...##...#####.#...##...#####."}, {'C', ".###.#...##....#....#....#...#.###."},
    {'D', "###..#..#.#...##...##...##..#.###.."}, {'E', "######....#....####.#....#....#####"},
    {'F', "######....#....####.#....#....#...."}, {'G', ".###.#...##....#.####...##...#.####"},
    {'H', "#...##...##...#######...##...##...#"}, {'I', ".###...#....#....#....#....#...###."},
    {'J', "..###...#....#....#....#.#..#..##.."}, {'K', "#...##..#.#.#..##...#.#..#..#.#...#"},
    {'L', "#....#....#....#....#....#....#####"}, {'M', "#...###.###.#.##.#.##...##...##...#"},
    {'N', "#...##...###..##.#.##..###...##...#"}, {'O', ".###.#...##...##...##...##...#.###."},
    {'P', "####.#...##...#####.#....#....#...."}, {'Q', ".###.#...##...##...##.#.##..#..##.#"},
    {'R', "####.#...##...#####.#.#..#..#.#...#"}, {'S', ".#####....#.....###.....#....#####."},
    {'T', "#####..#....#....#....#....#....#.."}, {'U', "#...##...##...##...##...##...#.###."},
    {'V', "#...##...##...##...##...#.#.#...#.."}, {'W', "#...##...##...##.#.##.#.##.#.#.#.#."},
    {'X', "#...##...#.#.#...#...#.#.#...##...#"}, {'Y', "#...##...#.#.#...#....#....#....#.."},
    {'Z', "#####....#...#...#...#...#....#####"},
};

const char* GlyphRows(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  for (const auto& g : kFont)
    if (g.c == c) return g.rows;
  return nullptr;
}

void PutU32(std::string* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((v >> s) & 0xff));
}

void Chunk(std::string* out, const char* type, const std::string& data) {
  PutU32(out, static_cast<uint32_t>(data.size()));
  std::string body(type, 4);
  body += data;
  out->append(body);
  PutU32(out,
         static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
}

}  // namespace

Canvas::Canvas(int width, int height, Rgb bg)
    : width_(std::max(1, width)),
      height_(std::max(1, height)),
      pixels_(static_cast<size_t>(width_) * static_cast<size_t>(height_) * 3) {
  for (size_t i = 0; i < pixels_.size(); i += 3) {
    pixels_[i] = bg.r;
    pixels_[i + 1] = bg.g;
    pixels_[i + 2] = bg.b;
  }
}

Rgb Canvas::At(int x, int y) const {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return {};
  const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x)) * 3;
  return {pixels_[i], pixels_[i + 1], pixels_[i + 2]};
}

void Canvas::Set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x)) * 3;
  pixels_[i] = c.r;
  pixels_[i + 1] = c.g;
  pixels_[i + 2] = c.b;
}

void Canvas::FillRect(int x0, int y0, int x1, int y1, Rgb c) {
  for (int y = std::min(y0, y1); y <= std::max(y0, y1); ++y)
    for (int x = std::min(x0, x1); x <= std::max(x0, x1); ++x) Set(x, y, c);
}

void Canvas::Line(int x0, int y0, int x1, int y1, Rgb c, int dash) {
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  for (int step = 0;; ++step) {
    if (dash <= 0 || (step / dash) % 2 == 0) Set(x0, y0, c);
    if (x0 == x1 && y0 == y1) return;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

int Canvas::Text(int x, int y, const std::string& text, Rgb c, int scale) {
  int at = x;
  for (char ch : text) {
    if (const char* rows = GlyphRows(ch)) {
      for (int r = 0; r < 7; ++r)
        for (int col = 0; col < 5; ++col)
          if (rows[r * 5 + col] == '#')
            FillRect(at + col * scale, y + r * scale, at + col * scale + scale - 1, y + r * scale + scale - 1, c);
    }
    at += 6 * scale;
  }
  return at - x;
}

std::string Canvas::EncodePng() const {
  std::string raw;
  raw.reserve(pixels_.size() + static_cast<size_t>(height_));
  const size_t row = static_cast<size_t>(width_) * 3;
  for (int y = 0; y < height_; ++y) {
    raw.push_back(0);  // filter: none
    raw.append(reinterpret_cast<const char*>(pixels_.data()) + static_cast<size_t>(y) * row, row);
  }
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string z(size, '\0');
  compress2(reinterpret_cast<Bytef*>(z.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
            static_cast<uLong>(raw.size()), 9);
  z.resize(size);
  std::string out("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  PutU32(&ihdr, static_cast<uint32_t>(width_));
  PutU32(&ihdr, static_cast<uint32_t>(height_));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, filter 0, no interlace
  Chunk(&out, "IHDR", ihdr);
  Chunk(&out, "IDAT", z);
  Chunk(&out, "IEND", "");
  return out;
}

}  // namespace inferd::tune
