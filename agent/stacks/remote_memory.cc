#include "agent/stacks/remote_memory.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace collscope::stacks {

bool RemoteMemory::Read(uint64_t addr, void* out, size_t len) const {
  uint64_t page = addr & ~static_cast<uint64_t>(kPageSize - 1);
  if (len == 0 || addr == 0 || addr + len > page + kPageSize) return ReadDirect(addr, out, len);
  auto it = pages_.find(page);
  if (it == pages_.end()) {
    if (pages_.size() >= kMaxPages) pages_.clear();
    std::vector<uint8_t> bytes(kPageSize);
    if (!ReadDirect(page, bytes.data(), kPageSize)) bytes.clear();  // e.g. the page's end unmapped
    it = pages_.emplace(page, std::move(bytes)).first;
  }
  if (it->second.empty()) return ReadDirect(addr, out, len);
  std::memcpy(out, it->second.data() + (addr - page), len);
  return true;
}

bool RemoteMemory::ReadDirect(uint64_t addr, void* out, size_t len) const {
  if (len == 0) return true;
  if (addr == 0) {
    errno = EFAULT;
    return false;
  }
  iovec local{out, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(len)) return true;
  if (n >= 0) errno = EFAULT;  // a partial read: the range crosses into unmapped memory
  return false;
}

}  // namespace collscope::stacks
