// HTTP/1.1 message framing shared by the agent's client and server (RFC 9112): reading a message
// head of bounded size from a socket, and splitting it into its start line and header fields.
//
// Contract: a head is read only up to `max_bytes`, whatever the peer sends. Parsing is strict:
// obsolete line folding, whitespace before a field's colon, and names that are not tokens are
// refused rather than guessed at (a lenient parser is how request smuggling starts). Lines may
// end in CRLF or a bare LF. Header names keep their case and are compared without it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/socket_io.h"
#include "core/status.h"

namespace collscope::agent {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpHead {
  std::string start_line;
  HttpHeaders headers;
};

// Why ReadHead failed, for a server that answers each case differently.
enum class HeadFailure { kNone, kTooLarge, kTimedOut, kClosed, kOther };

// Reads from `fd` into `*buffer` until it holds a whole head (start line, fields, empty line) and
// returns the head's length; bytes past it (the start of a body) stay in the buffer after it.
// Bytes already in `*buffer` count as read. `*failure`, when given, says why it failed.
Result<size_t> ReadHead(int fd, std::string* buffer, size_t max_bytes, Deadline deadline,
                        int wake_fd = -1, HeadFailure* failure = nullptr);

// Splits a head returned by ReadHead (its final empty line may be included or not).
Result<HttpHead> ParseHead(std::string_view head);

bool IsHttpToken(std::string_view s);
// Field values may hold visible characters, spaces and tabs, but never CR, LF or NUL.
bool IsValidFieldValue(std::string_view s);
bool EqualsIgnoringCase(std::string_view a, std::string_view b);

// The value of the first field called `name`, or null.
const std::string* FindHeader(const HttpHeaders& headers, std::string_view name);

}  // namespace collscope::agent
