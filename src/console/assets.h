// The web console's static files (src/console/static/), compiled into the
// binary at build time (cmake/embed_assets.cmake writes the table): the
// console needs no files beside inferd, no CDN and no build step of its own.
//
// Thread-safety: immutable data.
#pragma once

#include <span>
#include <string_view>

namespace inferd::console {

struct Asset {
  std::string_view path;          // relative to static/, e.g. "app.js"
  std::string_view content_type;  // from the extension
  std::string_view body;
  std::string_view etag;  // quoted: "\"<16 hex digits of the file's SHA-1>\""
};

std::span<const Asset> ConsoleAssets();
// The file at `path` (relative to static/), null when there is none.
const Asset* FindConsoleAsset(std::string_view path);

}  // namespace inferd::console
