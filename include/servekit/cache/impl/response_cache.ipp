#pragma once
/// \file
/// Definitions for servekit/cache/response_cache.hpp. Compiled once into servekit::servekit, or
/// included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/cache/response_cache.hpp>
#include <servekit/core/detail/linkage.hpp>

namespace servekit {

SERVEKIT_DECL bool response_cache::insert(cache_key key, const tensor_list& outputs) {
  for (const auto& t : outputs) {
    if (!t.data.location().host_accessible()) {
      return false; // Triton inserts only responses whose outputs are all in CPU memory
    }
  }
  const std::size_t bytes = entry_bytes(key, outputs);
  shard& s = shard_of(key.hash());
  if (bytes > s.capacity) {
    return false;
  }
  // Build the entry (copying the outputs) before taking the lock.
  const std::uint64_t hash = key.hash();
  auto e = std::make_shared<entry>(std::move(key).release_bytes(), hash, copy_of(outputs), bytes);
  std::vector<std::shared_ptr<const entry>> evicted; // destroyed after the lock is released
  {
    const std::lock_guard lock{s.mutex};
    if (const auto it = s.index.find(key_ref{hash, e->key}); it != s.index.end()) {
      s.lru.splice(s.lru.begin(), s.lru, it->second);
      return false;
    }
    while (s.bytes_in_use + bytes > s.capacity) {
      std::shared_ptr<const entry>& victim = s.lru.back();
      s.index.erase(key_ref{victim->hash, victim->key});
      s.bytes_in_use -= victim->bytes;
      ++s.counters.evictions;
      evicted.push_back(std::move(victim));
      s.lru.pop_back();
    }
    s.lru.push_front(std::move(e));
    s.index.emplace(key_ref{hash, s.lru.front()->key}, s.lru.begin());
    s.bytes_in_use += bytes;
    ++s.counters.insertions;
  }
  return true;
}

[[nodiscard]] SERVEKIT_DECL std::size_t
response_cache::entry_bytes(const cache_key& key, const tensor_list& outputs) noexcept {
  std::size_t bytes = entry_overhead + key.bytes().size();
  for (const auto& t : outputs) {
    bytes += t.name.size() + t.data.size();
  }
  return bytes;
}

[[nodiscard]] SERVEKIT_DECL tensor_list response_cache::copy_of(const tensor_list& outputs) {
  tensor_list copy;
  copy.reserve(outputs.size());
  for (const auto& t : outputs) {
    copy.push_back(tensor{t.name, t.type, t.shape, buffer::copy_of(t.data.bytes())});
  }
  return copy;
}

} // namespace servekit
