#include "core/byte_size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace inferd {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Multiplier for a unit suffix (already lower-cased), 0 when unknown.
double UnitMultiplier(const std::string& unit) {
  struct Unit {
    const char* name;
    double mult;
  };
  static const Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"k", 1024.0},
      {"kib", 1024.0},
      {"kb", 1e3},
      {"m", 1048576.0},
      {"mib", 1048576.0},
      {"mb", 1e6},
      {"g", 1073741824.0},
      {"gib", 1073741824.0},
      {"gb", 1e9},
      {"t", 1099511627776.0},
      {"tib", 1099511627776.0},
      {"tb", 1e12},
  };
  for (const auto& u : kUnits)
    if (unit == u.name) return u.mult;
  return 0;
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("invalid byte size '" + std::string(text) + "': " + why +
                                   " (examples: 1073741824, 512MiB, 2GiB, 300MB)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return bad("it does not start with a number");
  double value = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc() || p != text.data() + i) return bad("malformed number");
  size_t j = i;
  while (j < text.size() && text[j] == ' ') ++j;
  const double mult = UnitMultiplier(Lower(text.substr(j)));
  if (mult == 0) return bad("unknown unit '" + std::string(text.substr(j)) + "'");
  const double bytes = std::floor(value * mult);
  if (!std::isfinite(bytes) || bytes >= 9.2e18) return bad("too large");
  return static_cast<uint64_t>(bytes);
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kNames[u]);
  return buf;
}

}  // namespace inferd
