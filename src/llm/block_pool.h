// BlockPool: the bookkeeping of a paged KV cache (vLLM's block manager), free
// of the tensors themselves. The cache is `num_blocks` blocks of
// `block_size` positions. A sequence holds a table of blocks; full blocks are
// registered by a hash of their tokens and of every token before them
// (prefix caching), so another sequence with the same prefix (a shared
// system prompt, the next turn of a chat) takes them instead of recomputing.
//
// A block is in use (refcount > 0), or free: free blocks wait in LRU order,
// and a free block that still holds a registered prefix keeps it until it is
// reused for something else.
//
// Thread-safety: not thread-safe (the generative scheduler's loop owns it).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace inferd::llm {

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size, bool prefix_caching);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  // Blocks a new allocation can take (free, including those holding cached prefixes).
  int32_t free_blocks() const { return static_cast<int32_t>(free_.size()); }
  // Blocks in use, as a fraction of all.
  double usage() const { return 1.0 - static_cast<double>(free_.size()) / static_cast<double>(blocks_.size()); }

  // The cached blocks holding the longest prefix of `tokens` made of full
  // blocks, leaving at least one token to compute (its logits are needed).
  // Takes a reference on each; counts a query and the hit blocks. `salt`
  // keys what computed the blocks besides the tokens (a LoRA adapter: its
  // keys and values differ from the base model's); 0 for the base model.
  std::vector<int32_t> MatchPrefix(std::span<const int32_t> tokens, uint64_t salt = 0);

  // One block for a sequence (refcount 1), least recently freed first; its
  // old cached prefix is forgotten. nullopt when none is free.
  std::optional<int32_t> Allocate();

  // Registers a sequence's full block `index` (its table's entry) whose
  // tokens are tokens[index * block_size, (index + 1) * block_size), so later
  // prefixes can match it. `tokens` must hold every token up to its end;
  // `salt` as MatchPrefix's.
  void Register(std::span<const int32_t> table, size_t index, std::span<const int32_t> tokens, uint64_t salt = 0);

  // Drops a reference on each block (a finished or preempted sequence).
  void Release(std::span<const int32_t> blocks);

  // Prefix cache counters (blocks): how many were looked up, how many hit.
  uint64_t queried_blocks() const { return queried_; }
  uint64_t hit_blocks() const { return hits_; }

 private:
  struct Block {
    int32_t refs = 0;
    std::optional<uint64_t> hash;  // registered prefix hash
    std::vector<int32_t> tokens;   // the block's tokens when registered (collision check)
    uint64_t parent = 0;           // the hash of the prefix before it
    std::list<int32_t>::iterator free_it;
    bool in_free = false;
  };
  static uint64_t Hash(uint64_t parent, std::span<const int32_t> tokens);
  void Take(int32_t id);  // refcount + 1, out of the free list when it was there

  int32_t block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::list<int32_t> free_;  // LRU: front = freed longest ago
  std::unordered_map<uint64_t, int32_t> cached_;
  uint64_t queried_ = 0, hits_ = 0;
};

}  // namespace inferd::llm
