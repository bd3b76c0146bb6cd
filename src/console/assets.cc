#include "console/assets.h"

namespace inferd::console {

const Asset* FindConsoleAsset(std::string_view path) {
  for (const Asset& a : ConsoleAssets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace inferd::console
