// A safe reader for Python pickles of plain data (protocols 0-5 binary opcodes): dicts, lists,
// tuples, sets, strings, bytes, ints, floats, booleans and None. It never executes anything:
// opcodes that would look up or call Python objects (GLOBAL, REDUCE, BUILD, INST, OBJ, ...) are
// refused with an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace collscope::readers {

struct PyValue {
  enum class Type : uint8_t { kNone, kBool, kInt, kFloat, kStr, kBytes, kList, kTuple, kDict, kSet };
  Type type = Type::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                                   // kStr, kBytes
  std::vector<std::shared_ptr<PyValue>> items;     // kList, kTuple, kSet
  std::vector<std::pair<std::shared_ptr<PyValue>, std::shared_ptr<PyValue>>> dict;  // kDict

  bool is_none() const { return type == Type::kNone; }
  // Dict lookup by string key; nullptr when absent or not a dict.
  const PyValue* Get(std::string_view key) const;
  int64_t AsInt(int64_t dflt = 0) const;
  std::string AsStr() const;  // str, or a number printed; "" for None
};

// Bounds (docs/ingest.md): nesting depth, and the size a consumer meets once shared (memoised)
// values are counted at each use: kMaxPickleExpansion times the pickle, at least
// kMinPickleExpansion bytes. Lengths past the end of the data, cycles and deeper or larger
// values are refused with a reason.
inline constexpr uint32_t kMaxPickleDepth = 1000;
inline constexpr uint64_t kMaxPickleExpansion = 64;
inline constexpr uint64_t kMinPickleExpansion = uint64_t{256} << 20;

Result<std::shared_ptr<PyValue>> ParsePickle(std::string_view data);
Result<std::shared_ptr<PyValue>> ReadPickleFile(const std::string& path);

}  // namespace collscope::readers
