#include "llm/block_pool.h"

#include <algorithm>

namespace inferd::llm {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size, bool prefix_caching)
    : block_size_(block_size), prefix_caching_(prefix_caching), blocks_(static_cast<size_t>(num_blocks)) {
  for (int32_t i = 0; i < num_blocks; ++i) {
    free_.push_back(i);
    blocks_[static_cast<size_t>(i)].free_it = std::prev(free_.end());
    blocks_[static_cast<size_t>(i)].in_free = true;
  }
}

uint64_t BlockPool::Hash(uint64_t parent, std::span<const int32_t> tokens) {
  // FNV-1a over the parent hash and the tokens, then a final mix (splitmix64).
  uint64_t h = 1469598103934665603ull ^ parent;
  for (int32_t t : tokens) {
    h ^= static_cast<uint32_t>(t);
    h *= 1099511628211ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

void BlockPool::Take(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  if (b.in_free) {
    free_.erase(b.free_it);
    b.in_free = false;
  }
  ++b.refs;
}

std::vector<int32_t> BlockPool::MatchPrefix(std::span<const int32_t> tokens, uint64_t salt) {
  std::vector<int32_t> out;
  if (!prefix_caching_ || tokens.empty()) return out;
  const size_t full = (tokens.size() - 1) / static_cast<size_t>(block_size_);  // keep one token to compute
  queried_ += full;
  uint64_t parent = salt;
  for (size_t i = 0; i < full; ++i) {
    auto chunk = tokens.subspan(i * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_));
    const uint64_t h = Hash(parent, chunk);
    auto it = cached_.find(h);
    if (it == cached_.end()) break;
    const Block& b = blocks_[static_cast<size_t>(it->second)];
    if (b.parent != parent || !std::equal(chunk.begin(), chunk.end(), b.tokens.begin(), b.tokens.end())) break;
    Take(it->second);
    out.push_back(it->second);
    parent = h;
  }
  hits_ += out.size();
  return out;
}

std::optional<int32_t> BlockPool::Allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t id = free_.front();
  Block& b = blocks_[static_cast<size_t>(id)];
  if (b.hash) {
    auto it = cached_.find(*b.hash);
    if (it != cached_.end() && it->second == id) cached_.erase(it);
    b.hash.reset();
    b.tokens.clear();
  }
  Take(id);
  return id;
}

void BlockPool::Register(std::span<const int32_t> table, size_t index, std::span<const int32_t> tokens, uint64_t salt) {
  if (!prefix_caching_ || index >= table.size()) return;
  const size_t bs = static_cast<size_t>(block_size_);
  if (tokens.size() < (index + 1) * bs) return;
  Block& b = blocks_[static_cast<size_t>(table[index])];
  if (b.hash) return;  // already registered (it came from the cache)
  uint64_t parent = salt;
  for (size_t i = 0; i < index; ++i) {
    const Block& prev = blocks_[static_cast<size_t>(table[i])];
    parent = prev.hash ? *prev.hash : Hash(parent, tokens.subspan(i * bs, bs));
  }
  auto chunk = tokens.subspan(index * bs, bs);
  const uint64_t h = Hash(parent, chunk);
  if (cached_.count(h)) return;  // another block holds this prefix already
  b.hash = h;
  b.parent = parent;
  b.tokens.assign(chunk.begin(), chunk.end());
  cached_[h] = table[index];
}

void BlockPool::Release(std::span<const int32_t> blocks) {
  // Freed in reverse so a sequence's last blocks are reused first and its
  // prefix (the most shareable part) stays cached longest.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    Block& b = blocks_[static_cast<size_t>(*it)];
    if (b.refs <= 0) continue;
    if (--b.refs == 0) {
      free_.push_back(*it);
      b.free_it = std::prev(free_.end());
      b.in_free = true;
    }
  }
}

}  // namespace inferd::llm
