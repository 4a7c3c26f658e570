#include "core/readers/pickle.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

namespace collscope::readers {

const PyValue* PyValue::Get(std::string_view key) const {
  if (type != Type::kDict) return nullptr;
  for (const auto& [k, v] : dict)
    if (k && k->type == Type::kStr && k->s == key) return v.get();
  return nullptr;
}

int64_t PyValue::AsInt(int64_t dflt) const {
  switch (type) {
    case Type::kInt: return i;
    case Type::kBool: return b;
    // A float outside int64 (or NaN) is no integer: converting it would be undefined.
    case Type::kFloat: return f >= -9.2e18 && f <= 9.2e18 ? static_cast<int64_t>(f) : dflt;
    case Type::kStr: {
      char* end = nullptr;
      const long long v = std::strtoll(s.c_str(), &end, 10);
      return end && *end == 0 && !s.empty() ? v : dflt;
    }
    default: return dflt;
  }
}

std::string PyValue::AsStr() const {
  switch (type) {
    case Type::kStr:
    case Type::kBytes: return s;
    case Type::kInt: return std::to_string(i);
    case Type::kBool: return b ? "True" : "False";
    case Type::kFloat: return std::to_string(f);
    default: return "";
  }
}

namespace {

using P = std::shared_ptr<PyValue>;

P Make(PyValue::Type t) {
  auto v = std::make_shared<PyValue>();
  v->type = t;
  return v;
}

// Unlinks every container reachable from `roots` without recursion, so that a refused value,
// however deep or self-referencing, is freed without overflowing the stack or leaking a cycle.
void Release(std::vector<P>& roots) {
  std::vector<P> work = std::move(roots);
  roots.clear();
  while (!work.empty()) {
    P v = std::move(work.back());
    work.pop_back();
    if (!v) continue;
    for (P& c : v->items) work.push_back(std::move(c));
    for (auto& [k, x] : v->dict) {
      work.push_back(std::move(k));
      work.push_back(std::move(x));
    }
    v->items.clear();
    v->dict.clear();
  }
}

// Checks what a consumer would meet walking the value: no cycle, no nesting deeper than
// kMaxPickleDepth, and no more than `max_expanded` bytes once shared (memoised) values are
// counted at each use, as a consumer copying them would. Iterative, for the same reason.
Status CheckShape(const P& root, uint64_t max_expanded) {
  struct Frame {
    PyValue* v;
    size_t next;  // children visited
    uint32_t depth;
  };
  std::unordered_map<PyValue*, uint64_t> done;  // expanded size of finished values
  std::unordered_map<PyValue*, bool> open;
  std::vector<Frame> stack{{root.get(), 0, 1}};
  open[root.get()] = true;
  auto child = [](PyValue* v, size_t i) -> PyValue* {
    if (i < v->items.size()) return v->items[i].get();
    i -= v->items.size();
    if (i < 2 * v->dict.size()) return (i % 2 ? v->dict[i / 2].second : v->dict[i / 2].first).get();
    return nullptr;
  };
  while (!stack.empty()) {
    Frame& f = stack.back();
    PyValue* c = child(f.v, f.next);
    if (!c) {
      uint64_t size = 16 + f.v->s.size();
      for (size_t i = 0; PyValue* x = child(f.v, i); ++i) size = std::min(max_expanded + 1, size + done[x]);
      if (size > max_expanded)
        return Status::Corruption("pickle: expands past " + std::to_string(max_expanded) +
                             " bytes through shared (memoised) values; refused");
      done[f.v] = size;
      open.erase(f.v);
      stack.pop_back();
      continue;
    }
    ++f.next;
    if (open.count(c)) return Status::Corruption("pickle: a value contains itself; refused");
    if (done.count(c)) continue;
    if (f.depth + 1 > kMaxPickleDepth)
      return Status::Corruption("pickle: nested deeper than " + std::to_string(kMaxPickleDepth) + " levels; refused");
    open[c] = true;
    stack.push_back({c, 0, f.depth + 1});
  }
  return Status::Ok();
}

class Reader {
 public:
  Reader(std::string_view d, uint64_t max_expanded) : d_(d), max_expanded_(max_expanded) {}
  ~Reader() {
    // Whatever was built and not returned is unlinked: a value dropped on an error path (popped
    // off the stack for an APPEND that failed, say) may hold a cycle that no reference reaches.
    for (auto& [k, v] : memo_) stack_.push_back(std::move(v));
    memo_.clear();
    stack_.insert(stack_.end(), made_.begin(), made_.end());
    made_.clear();
    Release(stack_);
  }

  Result<P> Run() {
    while (pos_ < d_.size()) {
      const uint8_t op = static_cast<uint8_t>(d_[pos_++]);
      Status st = Step(op);
      if (!st.ok()) return st;
      if (done_) {
        if (stack_.size() != 1) return Status::Corruption("pickle: bad stack at STOP");
        P root = stack_.back();
        Status shape = CheckShape(root, max_expanded_);
        if (!shape.ok()) return shape;  // the destructor unlinks what was built
        stack_.clear();
        memo_.clear();
        DropUnreachable(root);
        return root;
      }
    }
    return Status::Corruption("pickle: truncated (no STOP)");
  }

 private:
  // Overflow-safe: a declared length near 2^64 must not wrap around.
  bool Need(uint64_t n) const { return n <= d_.size() - pos_; }
  uint64_t Le(size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(d_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  Status Push(P v) {
    stack_.push_back(std::move(v));
    return Status::Ok();
  }
  Result<P> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      return Status::Corruption("pickle: stack underflow");
    P v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Result<std::vector<P>> PopMark() {
    if (marks_.empty()) return Status::Corruption("pickle: no MARK");
    const size_t m = marks_.back();
    marks_.pop_back();
    if (m > stack_.size()) return Status::Corruption("pickle: bad MARK");
    std::vector<P> v(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    return v;
  }
  Status Str(size_t len_bytes, PyValue::Type t) {
    if (!Need(len_bytes)) return Status::Corruption("pickle: truncated");
    const uint64_t n = Le(len_bytes);
    if (!Need(n)) return Status::Corruption("pickle: truncated string");
    P v = New(t);
    v->s.assign(d_.data() + pos_, n);
    pos_ += n;
    return Push(v);
  }
  Status Int(int64_t x) {
    P v = New(PyValue::Type::kInt);
    v->i = x;
    return Push(v);
  }
  Status AddItems(const P& target, std::vector<P> items) {
    if (target->type == PyValue::Type::kDict) {
      if (items.size() % 2) return Status::Corruption("pickle: odd SETITEMS");
      for (size_t k = 0; k < items.size(); k += 2) target->dict.push_back({items[k], items[k + 1]});
      return Status::Ok();
    }
    if (target->type == PyValue::Type::kList || target->type == PyValue::Type::kSet) {
      for (auto& x : items) target->items.push_back(std::move(x));
      return Status::Ok();
    }
    return Status::Corruption("pickle: append to a non-container");
  }
  Status Top(P* out) {
    if (stack_.empty()) return Status::Corruption("pickle: empty stack");
    *out = stack_.back();
    return Status::Ok();
  }

  Status Step(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        if (!Need(1)) return Status::Corruption("pickle: truncated");
        pos_ += 1;
        return Status::Ok();
      case 0x95:  // FRAME
        if (!Need(8)) return Status::Corruption("pickle: truncated");
        pos_ += 8;
        return Status::Ok();
      case '.': done_ = true; return Status::Ok();
      case '(': marks_.push_back(stack_.size()); return Status::Ok();
      case '}': return Push(New(PyValue::Type::kDict));
      case ']': return Push(New(PyValue::Type::kList));
      case ')': return Push(New(PyValue::Type::kTuple));
      case 0x8f: return Push(New(PyValue::Type::kSet));  // EMPTY_SET
      case 'N': return Push(New(PyValue::Type::kNone));
      case 0x88: case 0x89: {  // NEWTRUE / NEWFALSE
        P v = New(PyValue::Type::kBool);
        v->b = op == 0x88;
        return Push(v);
      }
      case 'J': if (!Need(4)) return Status::Corruption("pickle: truncated"); return Int(static_cast<int32_t>(Le(4)));
      case 'K': if (!Need(1)) return Status::Corruption("pickle: truncated"); return Int(static_cast<int64_t>(Le(1)));
      case 'M': if (!Need(2)) return Status::Corruption("pickle: truncated"); return Int(static_cast<int64_t>(Le(2)));
      case 0x8a: case 0x8b: {  // LONG1 / LONG4
        const size_t lb = op == 0x8a ? 1 : 4;
        if (!Need(lb)) return Status::Corruption("pickle: truncated");
        const uint64_t n = Le(lb);
        if (n > 8 || !Need(n)) return Status::Corruption("pickle: integer too large");
        uint64_t v = 0;
        for (uint64_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(d_[pos_ + k])) << (8 * k);
        if (n > 0 && n < 8 && (static_cast<uint8_t>(d_[pos_ + n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
        pos_ += n;
        return Int(static_cast<int64_t>(v));
      }
      case 'G': {  // BINFLOAT, big-endian double
        if (!Need(8)) return Status::Corruption("pickle: truncated");
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<uint8_t>(d_[pos_ + k]);
        pos_ += 8;
        P v = New(PyValue::Type::kFloat);
        std::memcpy(&v->f, &bits, 8);
        return Push(v);
      }
      case 'X': return Str(4, PyValue::Type::kStr);   // BINUNICODE
      case 0x8c: return Str(1, PyValue::Type::kStr);  // SHORT_BINUNICODE
      case 0x8d: return Str(8, PyValue::Type::kStr);  // BINUNICODE8
      case 'T': return Str(4, PyValue::Type::kBytes);  // BINSTRING
      case 'U': return Str(1, PyValue::Type::kBytes);  // SHORT_BINSTRING
      case 'B': return Str(4, PyValue::Type::kBytes);  // BINBYTES
      case 'C': return Str(1, PyValue::Type::kBytes);  // SHORT_BINBYTES
      case 0x8e: return Str(8, PyValue::Type::kBytes);  // BINBYTES8
      case 0x96: return Str(8, PyValue::Type::kBytes);  // BYTEARRAY8
      case 't': case 0x85: case 0x86: case 0x87: {  // TUPLE, TUPLE1..3
        std::vector<P> items;
        if (op == 't') {
          auto m = PopMark();
          if (!m.ok()) return m.status();
          items = std::move(*m);
        } else {
          const int n = op - 0x84;
          for (int k = 0; k < n; ++k) {
            auto v = Pop();
            if (!v.ok()) return v.status();
            items.insert(items.begin(), *v);
          }
        }
        P t = New(PyValue::Type::kTuple);
        t->items = std::move(items);
        return Push(t);
      }
      case 'l': case 'd': case 0x91: {  // LIST, DICT, FROZENSET (from MARK)
        auto m = PopMark();
        if (!m.ok()) return m.status();
        P t = New(op == 'l' ? PyValue::Type::kList : op == 'd' ? PyValue::Type::kDict : PyValue::Type::kSet);
        Status st = AddItems(t, std::move(*m));
        if (!st.ok()) return st;
        return Push(t);
      }
      case 'a': {  // APPEND
        auto v = Pop();
        if (!v.ok()) return v.status();
        P t;
        COLLSCOPE_RETURN_IF_ERROR(Top(&t));
        return AddItems(t, {*v});
      }
      case 's': {  // SETITEM
        auto v = Pop();
        if (!v.ok()) return v.status();
        auto k = Pop();
        if (!k.ok()) return k.status();
        P t;
        COLLSCOPE_RETURN_IF_ERROR(Top(&t));
        return AddItems(t, {*k, *v});
      }
      case 'e': case 'u': case 0x90: {  // APPENDS, SETITEMS, ADDITEMS
        auto m = PopMark();
        if (!m.ok()) return m.status();
        P t;
        COLLSCOPE_RETURN_IF_ERROR(Top(&t));
        return AddItems(t, std::move(*m));
      }
      case 'q': if (!Need(1)) return Status::Corruption("pickle: truncated"); return Memo(Le(1));
      case 'r': if (!Need(4)) return Status::Corruption("pickle: truncated"); return Memo(Le(4));
      case 0x94: return Memo(memo_.size());  // MEMOIZE
      case 'h': case 'j': {  // BINGET, LONG_BINGET
        const size_t n = op == 'h' ? 1 : 4;
        if (!Need(n)) return Status::Corruption("pickle: truncated");
        auto it = memo_.find(Le(n));
        if (it == memo_.end()) return Status::Corruption("pickle: unknown memo");
        return Push(it->second);
      }
      case '0': { auto v = Pop(); return v.ok() ? Status::Ok() : v.status(); }  // POP
      case '2': {  // DUP
        P t;
        COLLSCOPE_RETURN_IF_ERROR(Top(&t));
        return Push(t);
      }
      case '1': { auto m = PopMark(); return m.ok() ? Status::Ok() : m.status(); }  // POP_MARK
      default: {
        char b[96];
        std::snprintf(b, sizeof b, "pickle: opcode 0x%02x at byte %zu is not plain data; refused", op, pos_ - 1);
        return Status::Corruption(b);
      }
    }
  }
  Status Memo(uint64_t idx) {
    if (stack_.empty()) return Status::Corruption("pickle: memo of empty stack");
    memo_[idx] = stack_.back();
    return Status::Ok();
  }

  std::string_view d_;
  uint64_t max_expanded_;
  size_t pos_ = 0;
  bool done_ = false;
  std::vector<P> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, P> memo_;
  std::vector<P> made_;  // every container built, for the destructor to unlink after a failure
  // After a success: a container built but dropped on the way (POP, a replaced memo entry) may
  // hold a cycle that nothing reaches; its own links are cut. Reachable ones stay whole.
  void DropUnreachable(const P& root) {
    std::unordered_set<const PyValue*> reached{root.get()};
    std::vector<const PyValue*> work{root.get()};
    while (!work.empty()) {
      const PyValue* v = work.back();
      work.pop_back();
      auto visit = [&](const P& c) {
        if (c && reached.insert(c.get()).second) work.push_back(c.get());
      };
      for (const P& c : v->items) visit(c);
      for (const auto& [k, x] : v->dict) {
        visit(k);
        visit(x);
      }
    }
    for (P& v : made_)
      if (!reached.count(v.get())) {
        v->items.clear();
        v->dict.clear();
      }
    made_.clear();
  }
  P New(PyValue::Type t) {
    P v = Make(t);
    if (t == PyValue::Type::kList || t == PyValue::Type::kDict || t == PyValue::Type::kTuple || t == PyValue::Type::kSet)
      made_.push_back(v);
    return v;
  }
};

}  // namespace

Result<std::shared_ptr<PyValue>> ParsePickle(std::string_view data) {
  const uint64_t max_expanded = std::max<uint64_t>(kMinPickleExpansion, data.size() * kMaxPickleExpansion);
  return Reader(data, max_expanded).Run();
}

Result<std::shared_ptr<PyValue>> ReadPickleFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IOError("cannot open " + path);
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto r = ParsePickle(data);
  if (!r.ok()) return r.status().WithPrefix(path + ": ");
  return r;
}

}  // namespace collscope::readers
