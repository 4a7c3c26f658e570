#include "agent/http_wire.h"

#include <algorithm>
#include <cctype>

namespace collscope::agent {
namespace {

// Where the empty line ending a head finishes, searching `buffer` from `from`; npos if absent.
size_t FindHeadEnd(std::string_view buffer, size_t from) {
  for (size_t i = buffer.find('\n', from); i != std::string_view::npos;
       i = buffer.find('\n', i + 1)) {
    if (i + 1 < buffer.size() && buffer[i + 1] == '\n') return i + 2;
    if (i + 2 < buffer.size() && buffer[i + 1] == '\r' && buffer[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

std::string_view TrimSpaceAndTab(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<size_t> ReadHead(int fd, std::string* buffer, size_t max_bytes, Deadline deadline,
                        int wake_fd, HeadFailure* failure) {
  auto fail = [&](HeadFailure why, Status st) -> Result<size_t> {
    if (failure) *failure = why;
    return st;
  };
  if (failure) *failure = HeadFailure::kNone;
  size_t searched = 0;
  for (;;) {
    if (size_t end = FindHeadEnd(*buffer, searched); end != std::string::npos) {
      if (end > max_bytes) break;
      return end;
    }
    // The terminator may straddle two reads: search again from just before the old end.
    searched = buffer->size() < 3 ? 0 : buffer->size() - 3;
    if (buffer->size() >= max_bytes) break;
    Result<size_t> n = ReceiveSome(
        fd, buffer, std::min<size_t>(16 << 10, max_bytes - buffer->size()), deadline, wake_fd);
    if (!n.ok()) {
      const bool timed_out = SteadyClock::now() >= deadline;
      return fail(timed_out ? HeadFailure::kTimedOut : HeadFailure::kOther, n.status());
    }
    if (*n == 0) {
      return fail(HeadFailure::kClosed,
                  Status::IOError("connection closed after " + std::to_string(buffer->size()) +
                                " bytes, before the end of the message head"));
    }
  }
  return fail(HeadFailure::kTooLarge,
              Status::Corruption("message head larger than " + std::to_string(max_bytes) + " bytes"));
}

Result<HttpHead> ParseHead(std::string_view head) {
  HttpHead out;
  bool first = true;
  while (!head.empty()) {
    const size_t nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    head.remove_prefix(nl == std::string_view::npos ? head.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {
      if (line.empty()) return Status::Corruption("empty start line");
      out.start_line = std::string(line);
      first = false;
      continue;
    }
    if (line.empty()) break;  // the end of the head
    if (line.front() == ' ' || line.front() == '\t') {
      return Status::Corruption("obsolete line folding in header field");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Status::Corruption("header field without a colon");
    const std::string_view name = line.substr(0, colon);
    if (!IsHttpToken(name)) return Status::Corruption("malformed header field name");
    const std::string_view value = TrimSpaceAndTab(line.substr(colon + 1));
    if (!IsValidFieldValue(value)) return Status::Corruption("control character in header field");
    out.headers.emplace_back(std::string(name), std::string(value));
  }
  if (first) return Status::Corruption("empty message head");
  return out;
}

bool IsHttpToken(std::string_view s) {
  static constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           kSpecials.find(c) != std::string_view::npos;
  });
}

bool IsValidFieldValue(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && u != '\t') || u == 0x7f;
  });
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

const std::string* FindHeader(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [n, v] : headers)
    if (EqualsIgnoringCase(n, name)) return &v;
  return nullptr;
}

}  // namespace collscope::agent
