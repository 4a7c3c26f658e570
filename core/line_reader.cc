#include "core/line_reader.h"

#include <fcntl.h>
#include <simdjson.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace collscope {

bool IsGzipPath(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

Result<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path, uint64_t start,
                                                     size_t block_size) {
  std::unique_ptr<LineReader> r(new LineReader());
  r->path_ = path;
  r->block_size_ = block_size;
  r->consumed_ = start;
  if (IsGzipPath(path)) {
    r->gz_ = gzopen(path.c_str(), "rb");
    if (!r->gz_) return Status::Error(path + ": cannot open: " + std::strerror(errno));
    gzbuffer(r->gz_, 1 << 20);
    if (start > 0 && gzseek(r->gz_, static_cast<z_off_t>(start), SEEK_SET) < 0)
      return Status::Error(path + ": cannot skip to offset " + std::to_string(start));
  } else {
    r->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (r->fd_ < 0) return Status::Error(path + ": cannot open: " + std::strerror(errno));
    if (start > 0 && ::lseek(r->fd_, static_cast<off_t>(start), SEEK_SET) < 0)
      return Status::Error(path + ": cannot seek: " + std::strerror(errno));
    posix_fadvise(r->fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  r->buf_.resize(block_size + simdjson::SIMDJSON_PADDING);
  return r;
}

LineReader::~LineReader() {
  if (fd_ >= 0) ::close(fd_);
  if (gz_) gzclose(gz_);
}

Result<size_t> LineReader::ReadSome(char* dst, size_t n) {
  if (gz_) {
    int got = gzread(gz_, dst, static_cast<unsigned>(n));
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(gz_, &err);
      return Status::Error(path_ + ": gzip error: " + (msg ? msg : "unknown"));
    }
    // A gzip file cut short (still being written) reads as a clean end: keep what we have.
    return static_cast<size_t>(got);
  }
  for (;;) {
    ssize_t got = ::read(fd_, dst, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) return Status::Error(path_ + ": read failed: " + std::strerror(errno));
  }
}

Result<bool> LineReader::Next(LineBlock* block) {
  if (tail_size_ > 0) {
    std::memmove(buf_.data(), buf_.data() + tail_start_, tail_size_);
    carry_ = tail_size_;
    tail_size_ = 0;
  } else if (tail_start_ > 0) {
    carry_ = 0;
  }
  tail_start_ = 0;
  for (;;) {
    if (eof_) {
      pending_ = carry_;
      return false;
    }
    size_t capacity = buf_.size() - simdjson::SIMDJSON_PADDING;
    if (carry_ == capacity) {
      // One line longer than the buffer: grow rather than split it.
      buf_.resize(capacity * 2 + simdjson::SIMDJSON_PADDING);
      capacity *= 2;
    }
    size_t filled = carry_;
    while (filled < capacity) {
      Result<size_t> got = ReadSome(buf_.data() + filled, capacity - filled);
      if (!got.ok()) return got.status();
      if (*got == 0) {
        eof_ = true;
        break;
      }
      filled += *got;
    }
    // Complete lines end at the last newline in the buffer.
    const char* base = buf_.data();
    const void* last_nl = memrchr(base, '\n', filled);
    if (!last_nl) {
      carry_ = filled;
      continue;
    }
    size_t complete = static_cast<const char*>(last_nl) - base + 1;
    // Zero the padding after the complete lines: simdjson may read (not use) it.
    std::memset(buf_.data() + filled, 0, std::min<size_t>(simdjson::SIMDJSON_PADDING,
                                                         buf_.size() - filled));
    block->data = base;
    block->size = complete;
    block->readable = filled + std::min<size_t>(simdjson::SIMDJSON_PADDING, buf_.size() - filled);
    block->offset = consumed_;
    consumed_ += complete;
    // Leave the incomplete tail for the next call; moved after the caller is done with the block.
    tail_start_ = complete;
    tail_size_ = filled - complete;
    return true;
  }
}

}  // namespace collscope

namespace collscope {

Result<uint64_t> FingerprintPrefix(const std::string& path, uint64_t len) {
  std::vector<char> buf(len);
  size_t got = 0;
  if (IsGzipPath(path)) {
    gzFile gz = gzopen(path.c_str(), "rb");
    if (!gz) return Status::Error(path + ": cannot open: " + std::strerror(errno));
    int n = len ? gzread(gz, buf.data(), static_cast<unsigned>(len)) : 0;
    gzclose(gz);
    if (n < 0) return Status::Error(path + ": gzip error");
    got = static_cast<size_t>(n);
  } else {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::Error(path + ": cannot open: " + std::strerror(errno));
    while (got < len) {
      ssize_t n = ::read(fd, buf.data() + got, len - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < got; ++i) {
    h ^= static_cast<unsigned char>(buf[i]);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace collscope
