// A deliberately small JSON reader for the capture tests: it keeps object key order (the
// Inspector format fixes it) and the raw text of numbers (so tests can check "%lf" formatting and
// read 64-bit integers exactly). Not for production use.
#ifndef COLLSCOPE_CAPTURE_NCCL_TEST_JSON_H_
#define COLLSCOPE_CAPTURE_NCCL_TEST_JSON_H_

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace collscope::capture::testing {

struct JVal {
  enum Type { kNull, kBool, kNum, kStr, kArr, kObj } type = kNull;
  bool b = false;
  std::string text;  // raw number text, or decoded string
  std::vector<JVal> arr;
  // Members as two parallel vectors: a pair holding JVal inside JVal is an incomplete type to
  // Clang's libstdc++ checks.
  std::vector<std::string> keys;
  std::vector<JVal> values;

  const JVal* Find(std::string_view key) const {
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return &values[i];
    return nullptr;
  }
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  const JVal& operator[](std::string_view key) const {
    static const JVal kMissing;
    const JVal* v = Find(key);
    return v != nullptr ? *v : kMissing;
  }
  std::vector<std::string> Keys() const { return keys; }
  unsigned long long U() const { return std::strtoull(text.c_str(), nullptr, 10); }
  long long I() const { return std::strtoll(text.c_str(), nullptr, 10); }
  double D() const { return std::strtod(text.c_str(), nullptr); }
};

class JParser {
 public:
  explicit JParser(std::string_view s) : p_(s.data()), e_(s.data() + s.size()) {}

  // Parses exactly one value followed only by whitespace.
  bool ParseAll(JVal* out) {
    if (!Value(out, 0)) return false;
    Ws();
    return p_ == e_;
  }

 private:
  void Ws() {
    while (p_ < e_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool Lit(std::string_view l) {
    if (static_cast<size_t>(e_ - p_) < l.size() || std::string_view(p_, l.size()) != l) {
      return false;
    }
    p_ += l.size();
    return true;
  }
  bool Str(std::string* out) {
    if (p_ >= e_ || *p_ != '"') return false;
    ++p_;
    while (p_ < e_ && *p_ != '"') {
      if (static_cast<unsigned char>(*p_) < 0x20) return false;
      if (*p_ == '\\') {
        if (++p_ >= e_) return false;
        switch (*p_) {
          case '"':
          case '\\':
          case '/':
            out->push_back(*p_);
            break;
          case 'n':
            out->push_back('\n');
            break;
          case 't':
            out->push_back('\t');
            break;
          case 'r':
            out->push_back('\r');
            break;
          case 'b':
            out->push_back('\b');
            break;
          case 'f':
            out->push_back('\f');
            break;
          case 'u': {
            if (e_ - p_ < 5) return false;
            out->push_back(
                static_cast<char>(std::strtol(std::string(p_ + 1, 4).c_str(), nullptr, 16)));
            p_ += 4;
            break;
          }
          default:
            return false;
        }
        ++p_;
      } else {
        out->push_back(*p_++);
      }
    }
    if (p_ >= e_) return false;
    ++p_;
    return true;
  }
  bool Num(std::string* out) {
    const char* s = p_;
    if (p_ < e_ && *p_ == '-') ++p_;
    if (p_ >= e_ || !(*p_ >= '0' && *p_ <= '9')) return false;
    while (p_ < e_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '.' || *p_ == 'e' || *p_ == 'E' ||
                       *p_ == '+' || *p_ == '-')) {
      ++p_;
    }
    out->assign(s, p_);
    return true;
  }
  bool Value(JVal* v, int depth) {
    if (depth > 64) return false;
    Ws();
    if (p_ >= e_) return false;
    switch (*p_) {
      case '{': {
        v->type = JVal::kObj;
        ++p_;
        Ws();
        if (p_ < e_ && *p_ == '}') {
          ++p_;
          return true;
        }
        for (;;) {
          Ws();
          std::string k;
          if (!Str(&k)) return false;
          Ws();
          if (p_ >= e_ || *p_++ != ':') return false;
          JVal child;
          if (!Value(&child, depth + 1)) return false;
          v->keys.push_back(std::move(k));
          v->values.push_back(std::move(child));
          Ws();
          if (p_ < e_ && *p_ == ',') {
            ++p_;
            continue;
          }
          if (p_ < e_ && *p_ == '}') {
            ++p_;
            return true;
          }
          return false;
        }
      }
      case '[': {
        v->type = JVal::kArr;
        ++p_;
        Ws();
        if (p_ < e_ && *p_ == ']') {
          ++p_;
          return true;
        }
        for (;;) {
          JVal child;
          if (!Value(&child, depth + 1)) return false;
          v->arr.push_back(std::move(child));
          Ws();
          if (p_ < e_ && *p_ == ',') {
            ++p_;
            continue;
          }
          if (p_ < e_ && *p_ == ']') {
            ++p_;
            return true;
          }
          return false;
        }
      }
      case '"':
        v->type = JVal::kStr;
        return Str(&v->text);
      case 't':
        v->type = JVal::kBool;
        v->b = true;
        return Lit("true");
      case 'f':
        v->type = JVal::kBool;
        return Lit("false");
      case 'n':
        return Lit("null");
      default:
        v->type = JVal::kNum;
        return Num(&v->text);
    }
  }

  const char* p_;
  const char* e_;
};

inline bool ParseJson(std::string_view s, JVal* out) { return JParser(s).ParseAll(out); }

}  // namespace collscope::capture::testing

#endif  // COLLSCOPE_CAPTURE_NCCL_TEST_JSON_H_
