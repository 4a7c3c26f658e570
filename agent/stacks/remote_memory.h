// Reads another process's memory with process_vm_readv: no ptrace stop, and one syscall per page
// touched within a sample rather than one per word (Invalidate() at each sample: the target's
// memory changes between samples; at most kMaxPages are kept). The caller must be allowed to ptrace
// the target (same user and Yama's ptrace_scope, or CAP_SYS_PTRACE); otherwise every read fails
// with EPERM.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace collscope::stacks {

class RemoteMemory {
 public:
  explicit RemoteMemory(pid_t pid) : pid_(pid) {}

  // Copies len bytes at addr into out; false (errno set) when any byte could not be read.
  bool Read(uint64_t addr, void* out, size_t len) const;
  void Invalidate() const { pages_.clear(); }

  template <typename T>
  bool ReadValue(uint64_t addr, T* out) const {
    return Read(addr, out, sizeof(T));
  }
  bool ReadPointer(uint64_t addr, uint64_t* out) const { return ReadValue(addr, out); }

  pid_t pid() const { return pid_; }

 private:
  static constexpr size_t kPageSize = 4096, kMaxPages = 256;
  bool ReadDirect(uint64_t addr, void* out, size_t len) const;
  pid_t pid_;
  mutable std::unordered_map<uint64_t, std::vector<uint8_t>> pages_;  // empty vector: unreadable
};

}  // namespace collscope::stacks
