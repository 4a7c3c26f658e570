// Tells the agent whether anything under its watched folders changed since it last asked, so
// an idle tick costs a few system calls instead of a walk over every file. Linux inotify on each
// folder (subfolders included, and ones created later); where inotify is unavailable or its watch
// limit is reached, it falls back to polling and says so, and Changed() is then always true.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace collscope::agent {

class FolderWatch {
 public:
  explicit FolderWatch(const std::vector<std::string>& roots);
  ~FolderWatch();
  FolderWatch(const FolderWatch&) = delete;
  FolderWatch& operator=(const FolderWatch&) = delete;

  // True when a file was written, created, moved or removed under a root since the last call
  // (and on the first call).
  bool Changed();
  // Hands a change back (the caller could not act on it this time), so the next call says so.
  void Requeue() { pending_ = true; }
  bool polling() const { return fd_ < 0; }
  // Why the watch polls ("" while inotify works).
  const std::string& polling_reason() const { return polling_reason_; }

 private:
  void AddTree(const std::string& dir);
  void Fallback(std::string why);

  int fd_ = -1;
  bool pending_ = true;  // the first call, or a change handed back
  std::vector<std::string> roots_;
  std::map<int, std::string> dirs_;  // watch descriptor -> folder
  std::string polling_reason_;
};

}  // namespace collscope::agent
