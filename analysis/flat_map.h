// An open-addressing hash map for the aggregate builder's hot loop (analysis/aggregate_builder.h):
// one probe sequence over a flat array of (key, value) slots, no node per entry, so counting a
// million records into a few hundred thousand groups costs tens of milliseconds instead of the
// hundreds a node-based std::unordered_map spends on allocation and cache misses.
//
// Contract: Key is trivially copyable with operator== and a hash functor; Value is default
// constructible. Entries are erased all at once (Clear), never one by one. References returned by operator[] stay valid only
// until the next insertion (the table grows by rehashing at half load). Iteration order is
// unspecified.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace collscope {

// A 64-bit mix of raw bytes (keys are small packed structs): fast and well spread, unlike
// std::hash of integers, which is the identity.
inline uint64_t HashBytes(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, b + i, n - i);
  h = (h ^ tail) * 0x94d049bb133111ebull;
  return h ^ (h >> 29);
}

// Hashes a key's bytes: for keys without padding (or with padding zeroed before use).
struct BytesHash {
  template <typename K>
  uint64_t operator()(const K& k) const { return HashBytes(&k, sizeof(K)); }
};

template <typename Key, typename Value, typename Hash = BytesHash>
class FlatMap {
 public:
  explicit FlatMap(size_t expected = 16) { Rehash(Capacity(expected)); }

  Value& operator[](const Key& key) {
    if ((size_ + 1) * 2 > slots_.size()) Rehash(slots_.size() * 2);
    size_t i = Hash{}(key) & mask_;
    while (used_[i]) {
      if (slots_[i].first == key) return slots_[i].second;
      i = (i + 1) & mask_;
    }
    used_[i] = 1;
    slots_[i].first = key;
    slots_[i].second = Value{};
    ++size_;
    return slots_[i].second;
  }

  size_t size() const { return size_; }

  // Forgets every entry, keeping the capacity.
  void Clear() {
    std::memset(used_.data(), 0, used_.size());
    size_ = 0;
  }

  // Calls f(key, value) for every entry.
  template <typename F>
  void ForEach(F&& f) const {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (used_[i]) f(slots_[i].first, slots_[i].second);
  }

 private:
  static size_t Capacity(size_t expected) {
    size_t c = 16;
    while (c < expected * 2) c *= 2;
    return c;
  }
  void Rehash(size_t capacity) {
    std::vector<std::pair<Key, Value>> old = std::move(slots_);
    std::vector<uint8_t> old_used = std::move(used_);
    slots_.assign(capacity, {});
    used_.assign(capacity, 0);
    mask_ = capacity - 1;
    size_ = 0;
    for (size_t i = 0; i < old.size(); ++i)
      if (old_used[i]) (*this)[old[i].first] = std::move(old[i].second);
  }

  std::vector<std::pair<Key, Value>> slots_;
  std::vector<uint8_t> used_;
  size_t mask_ = 0, size_ = 0;
};

}  // namespace collscope
