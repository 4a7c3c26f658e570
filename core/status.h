// Errors are values at library boundaries: Status for "did it work", Result<T> for "the value,
// or why not". Messages name what failed (a file, a line) so the caller can print them as they are;
// the code says what kind of failure it was, so that a caller (the CLI's exit status, say) can act
// on it without parsing the message. Both are [[nodiscard]]: an error dropped on the floor is the
// silence this project promises never to give.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace collscope {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller asked for something malformed or impossible (an option, a query)
  kNotFound,         // what was named does not exist (a file, a store, a run)
  kCorruption,       // an input exists but is not what it claims to be (a bad line, a truncated file)
  kIOError,          // the system refused (open, read, write, connect)
  kUnsupported,      // a valid request this build or format version cannot serve
  kInternal,         // a failure of collscope itself or of a library it calls
};

// "invalid argument", "not found", ...: how messages and JSON name a code.
inline std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kCorruption: return "corruption";
    case StatusCode::kIOError: return "I/O error";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string message) { return {StatusCode::kInvalidArgument, std::move(message)}; }
  static Status NotFound(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
  static Status Corruption(std::string message) { return {StatusCode::kCorruption, std::move(message)}; }
  static Status IOError(std::string message) { return {StatusCode::kIOError, std::move(message)}; }
  static Status Unsupported(std::string message) { return {StatusCode::kUnsupported, std::move(message)}; }
  static Status Internal(std::string message) { return {StatusCode::kInternal, std::move(message)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // For the one place a failure is of no further use: a rollback after the error being returned,
  // a reply to a client that has gone. Says so where [[nodiscard]] would otherwise flag it.
  void IgnoreError() const {}
  // The same kind of failure, told in other words (a summary of several).
  Status WithMessage(std::string message) const { return ok() ? *this : Status(code_, std::move(message)); }
  // The same failure with context in front ("file.log: " + message), keeping its code.
  Status WithPrefix(std::string_view prefix) const {
    return ok() ? *this : Status(code_, std::string(prefix) + message_);
  }

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status error) : v_(std::move(error)) {}  // NOLINT: must be an error status

  bool ok() const { return std::holds_alternative<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const { return value(); }
  T& operator*() { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace collscope

#define COLLSCOPE_RETURN_IF_ERROR(expr)       \
  do {                                        \
    ::collscope::Status _st = (expr);         \
    if (!_st.ok()) return _st;                \
  } while (0)
