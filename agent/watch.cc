#include "agent/watch.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace collscope::agent {

namespace {
constexpr uint32_t kEvents = IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM |
                             IN_DELETE | IN_DELETE_SELF | IN_ATTRIB;
}

FolderWatch::FolderWatch(const std::vector<std::string>& roots) : roots_(roots) {
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) {
    polling_reason_ = std::string("inotify unavailable: ") + std::strerror(errno);
    return;
  }
  for (const std::string& r : roots_) {
    std::error_code ec;
    if (std::filesystem::exists(r, ec)) AddTree(r);
    if (fd_ < 0) return;
  }
}

FolderWatch::~FolderWatch() {
  if (fd_ >= 0) ::close(fd_);
}

void FolderWatch::Fallback(std::string why) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  polling_reason_ = std::move(why);
}

void FolderWatch::AddTree(const std::string& dir) {
  if (fd_ < 0) return;
  const int wd = inotify_add_watch(fd_, dir.c_str(), kEvents);
  if (wd < 0) {
    // ENOSPC: the per-user watch limit; polling is slower but sees everything.
    if (errno == ENOSPC || errno == ENOMEM)
      Fallback(dir + ": inotify watch limit reached: " + std::strerror(errno));
    return;
  }
  dirs_[wd] = dir;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    // Links are not followed: the ingest walk follows them once, and a loop must not grow watches.
    if (it->is_directory(e2) && !it->is_symlink(e2)) AddTree(it->path().string());
  }
}

bool FolderWatch::Changed() {
  if (fd_ < 0) return true;
  bool changed = pending_;
  pending_ = false;
  alignas(inotify_event) char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        Fallback(std::string("inotify read failed: ") + std::strerror(errno));
        return true;
      }
      break;
    }
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      changed = true;
      // Events were lost: what changed is unknown, so treat it all as changed.
      if (e->mask & IN_Q_OVERFLOW) continue;
      if ((e->mask & (IN_CREATE | IN_MOVED_TO)) && (e->mask & IN_ISDIR) && e->len > 0) {
        auto it = dirs_.find(e->wd);
        if (it != dirs_.end()) AddTree(it->second + "/" + e->name);
        if (fd_ < 0) return true;
      }
      if (e->mask & IN_IGNORED) dirs_.erase(e->wd);
    }
  }
  // A root created after the start (the job's dump folder appears late) is watched once it exists.
  for (const std::string& r : roots_) {
    bool watched = false;
    for (const auto& [wd, d] : dirs_) watched = watched || d == r;
    std::error_code ec;
    if (!watched && std::filesystem::exists(r, ec)) {
      AddTree(r);
      changed = true;
    }
  }
  return changed;
}

}  // namespace collscope::agent
