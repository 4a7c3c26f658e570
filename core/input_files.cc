#include "core/input_files.h"

#include <dirent.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "core/line_reader.h"

namespace collscope {
namespace {

namespace fs = std::filesystem;

using FileId = std::pair<dev_t, ino_t>;

const char* KindName(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

struct Walk {
  const WantedFile& wanted;
  InputFiles& out;
  std::set<FileId> folders;
  std::vector<std::pair<std::string, FileId>> found;

  void Folder(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) {
      out.skipped.push_back(dir + ": cannot read folder: " + std::strerror(errno));
      return;
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) Entry(dir + "/" + name, false);
  }

  void Entry(const std::string& path, bool named) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      int err = errno;
      struct stat link;
      bool is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
      out.skipped.push_back(path + ": " + (is_link ? "broken or looping symlink: " : "cannot open: ") +
                            std::strerror(err));
      return;
    }
    if (S_ISDIR(st.st_mode)) {
      if (folders.insert({st.st_dev, st.st_ino}).second) Folder(path);
      return;
    }
    if (!S_ISREG(st.st_mode)) {
      // Never handed to `wanted`, which may open the file to look inside: a FIFO would block.
      out.skipped.push_back(path + ": " + KindName(st.st_mode) + ", not read");
      return;
    }
    if (wanted(path, named)) found.push_back({path, {st.st_dev, st.st_ino}});
  }
};

}  // namespace

Result<InputFiles> FindInputFiles(const std::vector<std::string>& paths, const WantedFile& wanted) {
  InputFiles out;
  Walk walk{wanted, out, {}, {}};
  for (const std::string& p : paths) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0 && errno == ENOENT) {
      struct stat link;
      if (::lstat(p.c_str(), &link) != 0) return Status::NotFound(p + ": no such file or directory");
    }
    std::error_code ec;
    std::string abs = fs::absolute(p, ec).lexically_normal().string();
    if (ec) abs = p;
    while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
    walk.Entry(abs, true);
  }
  // One path per file: the first in sorted order, whichever links lead to it.
  std::sort(walk.found.begin(), walk.found.end());
  std::set<FileId> listed;
  for (auto& [path, id] : walk.found)
    if (listed.insert(id).second) out.files.push_back(path);  // still in path order
  return out;
}

std::string StorablePath(const std::string& path) {
  std::string out;
  out.reserve(path.size());
  const auto* s = reinterpret_cast<const unsigned char*>(path.data());
  const size_t n = path.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool valid = len > 0 && i + len <= n;
    for (size_t k = 1; valid && k < len; ++k) valid = (s[i + k] & 0xc0) == 0x80;
    if (valid && len > 1) {
      // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
      uint32_t cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (s[i + k] & 0x3f);
      valid = (len == 2 && cp >= 0x80) || (len == 3 && cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff)) ||
              (len == 4 && cp >= 0x10000 && cp <= 0x10ffff);
    }
    if (!valid) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
      ++i;
    } else if (c == '\\') {
      out += "\\\\";
      ++i;
    } else {
      out.append(path, i, len);
      i += len;
    }
  }
  return out;
}

bool LooksLikeRasReport(std::string_view head) {
  if (head.starts_with("\xEF\xBB\xBF")) head.remove_prefix(3);
  while (!head.empty() && (head[0] == ' ' || head[0] == '\t' || head[0] == '\r' || head[0] == '\n'))
    head.remove_prefix(1);
  if (head.starts_with("NCCL version"))
    return head.find("\nCommunicators") != std::string_view::npos;
  if (head.starts_with("{"))
    return head.find("\"nccl_version\"") != std::string_view::npos &&
           head.find("\"communicators\"") != std::string_view::npos;
  return false;
}

bool LooksLikeRasMonitorLog(std::string_view head) {
  if (head.starts_with("\xEF\xBB\xBF")) head.remove_prefix(3);
  while (!head.empty() && (head[0] == ' ' || head[0] == '\t' || head[0] == '\r' || head[0] == '\n'))
    head.remove_prefix(1);
  if (head.starts_with("RAS Monitor Mode")) return true;
  // "[YYYY-MM-DD HH:MM:SS] PEER_"
  if (head.size() > 28 && head[0] == '[' && head[20] == ']' && head.substr(22, 5) == "PEER_") {
    for (size_t i : {1, 2, 3, 4, 6, 7, 9, 10, 12, 13, 15, 16, 18, 19})
      if (!std::isdigit(static_cast<unsigned char>(head[i]))) return false;
    return true;
  }
  if (head.starts_with("{")) {
    const size_t end = std::min(head.size(), head.find('}'));
    const std::string_view first = head.substr(0, end);
    return first.find("\"event\"") != std::string_view::npos && first.find("\"PEER_") != std::string_view::npos &&
           first.find("\"timestamp\"") != std::string_view::npos;
  }
  return false;
}

bool LooksLikePromTextfile(std::string_view head) {
  auto blanks = [](std::string_view* l) {
    while (!l->empty() && (l->front() == ' ' || l->front() == '\t')) l->remove_prefix(1);
  };
  while (!head.empty()) {
    const size_t e = std::min(head.find('\n'), head.size());
    std::string_view line = head.substr(0, e);
    head.remove_prefix(std::min(head.size(), e + 1));
    blanks(&line);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    size_t n = 0;
    while (n < line.size() && (std::isalnum(static_cast<unsigned char>(line[n])) || line[n] == '_' || line[n] == ':'))
      ++n;
    const std::string_view name = line.substr(0, n);
    line.remove_prefix(n);
    blanks(&line);
    return name.starts_with("nccl_") && name.size() > 5 && !line.empty() && line.front() == '{';
  }
  return false;
}

bool LooksLikeOtlpMetrics(std::string_view head) {
  head = head.substr(0, size_t{4} << 10);
  if (head.starts_with("\xEF\xBB\xBF")) head.remove_prefix(3);
  const size_t open = head.find_first_not_of(" \t\r\n");
  return open != std::string_view::npos && head[open] == '{' &&
         head.find("\"resourceMetrics\"") != std::string_view::npos;
}

MetricsFileFormat MetricsFileFormatOf(const std::string& path) {
  // One read tells both formats apart: every file of a folder comes through here.
  Result<std::string> head = ReadPrefix(path, 65536);
  if (head.ok() && LooksLikeOtlpMetrics(*head)) return MetricsFileFormat::kOtlp;
  if (path.ends_with(".prom")) return MetricsFileFormat::kPromText;
  // A text file: the probe reads no further than the first line that is no comment.
  if (head.ok() && head->find('\0') == std::string::npos && LooksLikePromTextfile(*head))
    return MetricsFileFormat::kPromText;
  return MetricsFileFormat::kNone;
}

bool IsPromTextfile(const std::string& path) {
  return MetricsFileFormatOf(path) == MetricsFileFormat::kPromText;
}

bool IsOtlpMetricsFile(const std::string& path) {
  return MetricsFileFormatOf(path) == MetricsFileFormat::kOtlp;
}

bool IsRasReportFile(const std::string& path) {
  // Every file of a folder comes through here: a small first read tells nearly all apart.
  bool whole = true;
  Result<std::string> first = ReadPrefix(path, 4096, &whole);
  if (!first.ok()) return false;
  std::string head = std::move(*first);
  std::string_view h = head;
  while (!h.empty() && (h[0] == ' ' || h[0] == '\n' || h[0] == '\r' || h[0] == '\t')) h.remove_prefix(1);
  if (h.starts_with("\xEF\xBB\xBF")) h.remove_prefix(3);
  if (LooksLikeRasMonitorLog(h)) return true;
  if (!h.starts_with("NCCL version") && !h.starts_with("{")) return false;
  if (h.starts_with("{") && h.find("\"nccl_version\"") == std::string_view::npos) return false;
  if (!LooksLikeRasReport(head) && !whole) {
    Result<std::string> more = ReadPrefix(path, size_t{1} << 20);
    if (!more.ok()) return false;
    head = std::move(*more);
  }
  return LooksLikeRasReport(head);
}

bool IsStepSeriesFile(const std::string& path) {
  static constexpr std::string_view kMagic = "{\"collscope_steps_version\":";
  std::ifstream in(path, std::ios::binary);
  char buf[kMagic.size()];
  if (!in.read(buf, sizeof(buf))) return false;
  return std::string_view(buf, sizeof(buf)) == kMagic;
}

namespace {

// The first line of a JSON-lines file when it is a JSON object of at most 64 KiB (a process line
// holds a command line), decompressed when the name ends in .gz as LineReader reads it; "" when
// it is not. Every Inspector log of a folder comes through here: a small first read tells most
// apart.
std::string FirstJsonObjectLine(const std::string& path) {
  constexpr size_t kMaxFirstLine = size_t{64} << 10;
  bool whole = true;
  Result<std::string> first = ReadPrefix(path, size_t{4} << 10, &whole);
  if (!first.ok()) return "";
  std::string head = std::move(*first);
  size_t eol = head.find('\n');
  if (!head.empty() && head[0] == '{' && eol == std::string::npos && !whole) {
    Result<std::string> more = ReadPrefix(path, kMaxFirstLine);
    if (!more.ok()) return "";
    head = std::move(*more);
    eol = head.find('\n');
  }
  if (head.empty() || head[0] != '{' || (eol == std::string::npos && head.size() == kMaxFirstLine)) return "";
  head.resize(std::min(eol, head.size()));
  return head;
}

}  // namespace

CollscopeLinesFormat CollscopeLinesFormatOf(const std::string& path) {
  static constexpr std::string_view kKernels = "collscope-kernels";
  const std::string head = FirstJsonObjectLine(path);
  // The stacks writer opens every file with these bytes; another writer's key order is parsed.
  if (head.starts_with("{\"collscope_stacks\":")) return CollscopeLinesFormat::kStacks;
  const bool stacks = head.find("\"collscope_stacks\"") != std::string::npos;
  if (!stacks && head.find(kKernels) == std::string::npos) return CollscopeLinesFormat::kNone;
  simdjson::dom::parser parser;
  simdjson::dom::object o;
  if (parser.parse(head).get_object().get(o) != simdjson::SUCCESS) return CollscopeLinesFormat::kNone;
  if (stacks && o["collscope_stacks"].error() != simdjson::NO_SUCH_FIELD) return CollscopeLinesFormat::kStacks;
  std::string_view type, format;
  return o["type"].get_string().get(type) == simdjson::SUCCESS && type == "process" &&
                 o["format"].get_string().get(format) == simdjson::SUCCESS && format == kKernels
             ? CollscopeLinesFormat::kKernelSummaries
             : CollscopeLinesFormat::kNone;
}

bool IsKernelSummaryFile(const std::string& path) {
  return CollscopeLinesFormatOf(path) == CollscopeLinesFormat::kKernelSummaries;
}

bool IsStackFile(const std::string& path) { return CollscopeLinesFormatOf(path) == CollscopeLinesFormat::kStacks; }

bool IsIterationLogLine(std::string_view line) {
  if (line.find("train_step_timing in s=") != std::string_view::npos) return true;
  return line.find("elapsed time per iteration (ms):") != std::string_view::npos &&
         line.find(" iteration ") != std::string_view::npos;
}

bool IsIterationLog(const std::string& path) {
  constexpr size_t kLookAhead = size_t{16} << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  // The first read is small: every Inspector log of a folder is sniffed, and its first byte says.
  std::string chunk(size_t{4} << 10, '\0');
  std::string carry;  // the unfinished line of the previous chunk
  size_t seen = 0;
  bool first = true;
  while (seen < kLookAhead) {
    if (!first) chunk.resize(size_t{1} << 16);
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    if (first) {
      first = false;
      size_t i = 0;
      while (i < n && (chunk[i] == ' ' || chunk[i] == '\n' || chunk[i] == '\r' || chunk[i] == '\t')) ++i;
      // JSON lines or documents (Inspector logs, traces, state files) and gzip are other formats.
      // A log line may open with a "[date]" stamp; a JSON array opens with "[{".
      if (i < n && chunk[i] == '{') return false;
      if (i < n && chunk[i] == '[') {
        size_t j = i + 1;
        while (j < n && (chunk[j] == ' ' || chunk[j] == '\n' || chunk[j] == '\r' || chunk[j] == '\t')) ++j;
        if (j < n && (chunk[j] == '{' || chunk[j] == ']')) return false;
      }
      if (n >= 2 && static_cast<unsigned char>(chunk[0]) == 0x1f && static_cast<unsigned char>(chunk[1]) == 0x8b) return false;
    }
    seen += n;
    carry.append(chunk, 0, n);
    size_t start = 0;
    for (size_t i = 0; i < carry.size(); ++i)
      if (carry[i] == '\n' || carry[i] == '\r') {
        if (IsIterationLogLine(std::string_view(carry).substr(start, i - start))) return true;
        start = i + 1;
      }
    carry.erase(0, start);
    if (carry.size() > (size_t{1} << 20)) carry.clear();  // no iteration line is that long
  }
  return IsIterationLogLine(carry);
}

}  // namespace collscope
