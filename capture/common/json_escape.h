// The one JSON string escaper of collscope: what capture writes (plugin records and state files,
// annotation series) and what the tool prints (findings, reports, traces, metrics, ground truth).
// Header-only, because the capture libraries link nothing but the C++ runtime.
//
// Contract: the output is always a valid JSON string, whatever the input bytes. Quotes,
// backslashes and control characters are escaped; valid UTF-8 is kept as it is; each byte of an
// invalid sequence is written as the text \xHH (the JSON "\\xHH"), the same convention the store
// uses for file names, so distinct names stay distinct and the record is never rejected. With
// html_safe, <, > and & are escaped as well, so that the string can sit inside an HTML <script>.
#ifndef COLLSCOPE_CAPTURE_COMMON_JSON_ESCAPE_H_
#define COLLSCOPE_CAPTURE_COMMON_JSON_ESCAPE_H_

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace collscope::capture {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are none.
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char c = u[i];
  const size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((u[i + k] & 0xC0) != 0x80) return 0;
  if (len == 3 && ((c == 0xE0 && u[i + 1] < 0xA0) || (c == 0xED && u[i + 1] >= 0xA0))) return 0;  // overlong, surrogate
  if (len == 4 && ((c == 0xF0 && u[i + 1] < 0x90) || (c == 0xF4 && u[i + 1] >= 0x90))) return 0;  // overlong, > U+10FFFF
  return len;
}

// Whether s goes into a JSON string as it is: ASCII, no control character, quote or backslash
// (nor, html_safe, < > &). Most strings are (names of ops, algorithms, hosts).
inline bool IsPlainJson(std::string_view s, bool html_safe = false) {
  return std::all_of(s.begin(), s.end(), [&](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' &&
           !(html_safe && (c == '<' || c == '>' || c == '&'));
  });
}

inline void AppendEscapedJsonString(std::string_view s, std::string* out, bool html_safe = false) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  if (IsPlainJson(s, html_safe)) {  // one append, not one per byte
    out->append(s);
    out->push_back('"');
    return;
  }
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (c == '\n') {
      out->append("\\n");
      ++i;
    } else if (c == '\r') {
      out->append("\\r");
      ++i;
    } else if (c == '\t') {
      out->append("\\t");
      ++i;
    } else if (c < 0x20 || (html_safe && (c == '<' || c == '>' || c == '&'))) {
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xf]);
      ++i;
    } else if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (const size_t len = Utf8SequenceLength(s, i); len > 0) {
      out->append(s.data() + i, len);
      i += len;
    } else {
      out->append("\\\\x");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xf]);
      ++i;
    }
  }
  out->push_back('"');
}

inline std::string JsonQuoted(std::string_view s, bool html_safe = false) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendEscapedJsonString(s, &out, html_safe);
  return out;
}

}  // namespace collscope::capture

#endif  // COLLSCOPE_CAPTURE_COMMON_JSON_ESCAPE_H_
