// Small text helpers the readers share for what they store and say.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace collscope::readers {

// Printable ASCII of at most `max` characters, "..." after a cut: for reasons and stored text (a
// VARCHAR must be UTF-8, and input bytes are anything).
inline std::string Clip(std::string_view s, size_t max = 120) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

// The text whole, its control bytes (an escape sequence, a carriage return, a newline that would
// fake a line) as '?': for names and text from the inputs that reach a terminal.
inline std::string Printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace collscope::readers
