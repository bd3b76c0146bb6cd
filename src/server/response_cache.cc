#include "server/response_cache.h"

#include <cstring>
#include <variant>

namespace inferd {
namespace {

void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 8);
}

// Length-prefixed, so no two different requests serialise alike.
void PutBytes(std::string* out, std::string_view s) {
  PutU64(out, s.size());
  out->append(s);
}

constexpr uint64_t kEntryOverhead = 128;  // list node, map slot, shared_ptr, strings
constexpr uint64_t kTensorOverhead = 64;

}  // namespace

std::string ResponseCacheKey(const InferRequest& r, uint64_t snapshot, uint64_t loaded_ns) {
  std::string key;
  size_t size = 64 + r.model_name.size() + r.model_version.size();
  for (const Tensor& t : r.inputs) size += 32 + t.name.size() + 8 * t.shape.size() + t.byte_size;
  key.reserve(size);
  PutBytes(&key, r.model_name);
  PutBytes(&key, r.model_version);
  PutU64(&key, snapshot);
  PutU64(&key, loaded_ns);
  PutU64(&key, r.inputs.size());
  for (const Tensor& t : r.inputs) {
    PutBytes(&key, t.name);
    PutU64(&key, static_cast<uint64_t>(t.dtype));
    PutU64(&key, t.shape.size());
    for (int64_t d : t.shape) PutU64(&key, static_cast<uint64_t>(d));
    PutBytes(&key, std::string_view(reinterpret_cast<const char*>(t.data), t.byte_size));
  }
  PutU64(&key, r.outputs.size());
  for (const RequestedOutput& o : r.outputs) {
    PutBytes(&key, o.name);
    PutU64(&key, (o.binary ? 1u : 0u) | (o.binary_set ? 2u : 0u));
    PutU64(&key, o.classification);
  }
  PutU64(&key, r.binary_data_output ? 1 : 0);
  // Request parameters may change an answer (a Python model reads them).
  PutU64(&key, r.parameters.size());
  for (const auto& [name, value] : r.parameters) {
    PutBytes(&key, name);
    PutU64(&key, value.index());
    if (const bool* b = std::get_if<bool>(&value)) {
      PutU64(&key, *b ? 1 : 0);
    } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
      PutU64(&key, static_cast<uint64_t>(*i));
    } else if (const double* d = std::get_if<double>(&value)) {
      uint64_t bits;
      std::memcpy(&bits, d, 8);
      PutU64(&key, bits);
    } else {
      PutBytes(&key, std::get<std::string>(value));
    }
  }
  return key;
}

std::shared_ptr<const InferResponse> ResponseCache::Lookup(const std::string& key) {
  MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  ++stats_.hits;
  return it->second->response;
}

void ResponseCache::Insert(std::string key, const InferResponse& response) {
  uint64_t data = 0;
  for (const Tensor& t : response.outputs) data += t.byte_size;
  const uint64_t bytes = key.size() + data + kEntryOverhead + kTensorOverhead * response.outputs.size();
  if (bytes > capacity_) return;
  // One buffer for every output: the entry owns its bytes.
  auto buffer = std::make_shared<std::string>(data, '\0');
  auto copy = std::make_shared<InferResponse>();
  copy->model_name = response.model_name;
  copy->model_version = response.model_version;
  uint64_t at = 0;
  for (const Tensor& t : response.outputs) {
    if (t.byte_size) std::memcpy(buffer->data() + at, t.data, t.byte_size);
    Tensor view;
    view.name = t.name;
    view.dtype = t.dtype;
    view.shape = t.shape;
    view.owner = buffer;
    view.data = reinterpret_cast<const std::byte*>(buffer->data() + at);
    view.byte_size = t.byte_size;
    copy->outputs.push_back(std::move(view));
    at += t.byte_size;
  }
  MutexLock lock(&mu_);
  if (auto it = index_.find(key); it != index_.end()) Erase(it->second);
  EvictTo(capacity_ - bytes);
  lru_.push_front(Entry{std::move(key), response.model_name, std::move(copy), bytes});
  index_.emplace(std::string_view(lru_.front().key), lru_.begin());
  stats_.bytes += bytes;
  ++stats_.entries;
  ++stats_.inserts;
}

void ResponseCache::EraseModel(const std::string& model) {
  MutexLock lock(&mu_);
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (it->model == model) Erase(it);
    it = next;
  }
}

ResponseCacheStats ResponseCache::Stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

void ResponseCache::EvictTo(uint64_t budget) {
  while (stats_.bytes > budget && !lru_.empty()) {
    Erase(std::prev(lru_.end()));
    ++stats_.evictions;
  }
}

void ResponseCache::Erase(Lru::iterator it) {
  index_.erase(std::string_view(it->key));
  stats_.bytes -= it->bytes;
  --stats_.entries;
  lru_.erase(it);
}

}  // namespace inferd
