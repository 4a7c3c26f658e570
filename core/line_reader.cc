#include "core/line_reader.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace collscope {

bool IsGzipPath(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

LineReader::LineReader(size_t block_size, uint64_t gzip_floor_bytes)
    : buf_(new char[block_size + simdjson::SIMDJSON_PADDING]),
      capacity_(block_size),
      gzip_floor_(gzip_floor_bytes) {}

LineReader::~LineReader() { Close(); }

void LineReader::Close() {
  if (fd_ >= 0) ::close(fd_);
  if (gz_) gzclose(gz_);
  fd_ = -1;
  gz_ = nullptr;
}

void LineReader::Grow() {
  std::unique_ptr<char[]> bigger(new char[capacity_ * 2 + simdjson::SIMDJSON_PADDING]);
  std::memcpy(bigger.get(), buf_.get(), capacity_);
  buf_ = std::move(bigger);
  capacity_ *= 2;
}

Status LineReader::Open(const std::string& path, uint64_t start) {
  Close();
  path_ = path;
  consumed_ = start;
  pending_ = carry_ = tail_start_ = tail_size_ = 0;
  decompressed_ = start;
  eof_ = false;
  deferred_ = Status::Ok();
  if (IsGzipPath(path)) {
    struct stat st;
    compressed_size_ = ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    gz_ = gzopen(path.c_str(), "rb");
    if (!gz_) return Status::IOError(path + ": cannot open: " + std::strerror(errno));
    gzbuffer(gz_, 1 << 20);
    if (start > 0 && gzseek(gz_, static_cast<z_off_t>(start), SEEK_SET) < 0)
      return Status::Corruption(path + ": cannot skip to offset " + std::to_string(start));
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return Status::IOError(path + ": cannot open: " + std::strerror(errno));
    if (start > 0 && ::lseek(fd_, static_cast<off_t>(start), SEEK_SET) < 0)
      return Status::IOError(path + ": cannot seek: " + std::strerror(errno));
    posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  return Status::Ok();
}

Result<size_t> LineReader::ReadSome(char* dst, size_t n) {
  if (gz_) {
    // gzread loses the count of what it decompressed before an error: 4 KiB reads bound that
    // loss to 4 KiB of the text before a corrupt block (its own 1 MiB buffer keeps reads cheap).
    int got = gzread(gz_, dst, static_cast<unsigned>(std::min<size_t>(n, size_t{4} << 10)));
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(gz_, &err);
      // Where the damage is, and what it costs: the compressed bytes from there on are lost.
      const z_off_t at = gzoffset(gz_);
      std::string where;
      if (at >= 0 && compressed_size_ > 0) {
        const uint64_t a = std::min<uint64_t>(static_cast<uint64_t>(at), compressed_size_);
        where = " at compressed byte " + std::to_string(a) + " of " +
                std::to_string(compressed_size_) + " (" + std::to_string(compressed_size_ - a) +
                " compressed bytes after it are lost)";
      }
      return Status::Corruption(path_ + ": gzip error" + where + ": " + (msg ? msg : "unknown") +
                           "; the complete lines decompressed before it are read");
    }
    // A gzip file cut short (still being written) reads as a clean end: keep what we have.
    decompressed_ += static_cast<uint64_t>(got);
    const uint64_t bound = std::max<uint64_t>(gzip_floor_, compressed_size_ * kMaxGzipRatio);
    if (decompressed_ > bound)
      return Status::Corruption(path_ + ": gzip expands past " + std::to_string(kMaxGzipRatio) +
                           " times its size (" + std::to_string(decompressed_) +
                           " bytes so far; a decompression bomb?): the rest is not read");
    return static_cast<size_t>(got);
  }
  for (;;) {
    ssize_t got = ::read(fd_, dst, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) return Status::IOError(path_ + ": read failed: " + std::strerror(errno));
  }
}

Result<bool> LineReader::Next(LineBlock* block) {
  if (tail_size_ > 0) {
    std::memmove(buf_.get(), buf_.get() + tail_start_, tail_size_);
    carry_ = tail_size_;
    tail_size_ = 0;
  } else if (tail_start_ > 0) {
    carry_ = 0;
  }
  tail_start_ = 0;
  for (;;) {
    if (eof_) {
      pending_ = carry_;
      if (!deferred_.ok()) {
        Status st = deferred_;
        deferred_ = Status::Ok();
        return st;
      }
      return false;
    }
    // One line longer than the buffer: grow rather than split it.
    if (carry_ == capacity_) Grow();
    const size_t capacity = capacity_;
    size_t filled = carry_;
    while (filled < capacity) {
      Result<size_t> got = ReadSome(buf_.get() + filled, capacity - filled);
      if (!got.ok()) {
        // A corrupt gzip block: the complete lines before it are returned first, the error after.
        deferred_ = got.status();
        eof_ = true;
        break;
      }
      if (*got == 0) {
        eof_ = true;
        break;
      }
      filled += *got;
    }
    // Complete lines end at the last newline in the buffer.
    const char* base = buf_.get();
    const void* last_nl = memrchr(base, '\n', filled);
    if (!last_nl) {
      carry_ = filled;
      if (filled >= kMaxLineBytes) return SkipOverlong(block);
      continue;
    }
    size_t complete = static_cast<const char*>(last_nl) - base + 1;
    // Zero the padding after the data: simdjson may read (never use) it.
    std::memset(buf_.get() + filled, 0, simdjson::SIMDJSON_PADDING);
    block->data = base;
    block->size = complete;
    block->readable = filled + simdjson::SIMDJSON_PADDING;
    block->offset = consumed_;
    block->overlong = 0;
    consumed_ += complete;
    // Leave the incomplete tail for the next call; moved after the caller is done with the block.
    tail_start_ = complete;
    tail_size_ = filled - complete;
    return true;
  }
}

Result<bool> LineReader::SkipOverlong(LineBlock* block) {
  // buf_ holds carry_ bytes without a newline: drop them and read on to the line's end.
  uint64_t skipped = carry_;
  carry_ = 0;
  for (;;) {
    Result<size_t> got = ReadSome(buf_.get(), capacity_);
    if (!got.ok()) return got.status();
    if (*got == 0) {
      // The overlong line has no newline yet: it is the file's unfinished last line.
      eof_ = true;
      pending_ = skipped;
      return false;
    }
    const void* nl = std::memchr(buf_.get(), '\n', *got);
    if (!nl) {
      skipped += *got;
      continue;
    }
    const size_t head = static_cast<const char*>(nl) - buf_.get() + 1;
    skipped += head;
    // What follows the newline is the start of the next lines.
    tail_start_ = head;
    tail_size_ = *got - head;
    *block = LineBlock{};
    block->offset = consumed_;
    block->overlong = skipped;
    consumed_ += skipped;
    return true;
  }
}

}  // namespace collscope

namespace collscope {

Result<std::string> ReadPrefix(const std::string& path, size_t max_bytes, bool* whole) {
  // Read one byte past the limit to tell whether there was more; the buffer grows with what is
  // read, never to the limit up front (a RAS report's limit is 1 GiB, its content kilobytes).
  const size_t want = max_bytes + 1;
  std::string out;
  gzFile gz = nullptr;
  int fd = -1;
  if (IsGzipPath(path))
    gz = gzopen(path.c_str(), "rb");
  else
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (!gz && fd < 0) return Status::IOError(path + ": cannot open: " + std::strerror(errno));
  Status error;
  while (out.size() < want) {
    const size_t got = out.size();
    out.resize(std::min(want, std::max<size_t>(got * 2, size_t{64} << 10)));
    const size_t room = std::min<size_t>(out.size() - got, size_t{1} << 30);
    const ssize_t n = gz ? gzread(gz, out.data() + got, static_cast<unsigned>(room))
                         : ::read(fd, out.data() + got, room);
    if (n < 0 && !gz && errno == EINTR) {
      out.resize(got);
      continue;
    }
    if (n < 0)
      error = Status::IOError(
          path + (gz ? ": gzip error" : ": cannot read: " + std::string(std::strerror(errno))));
    out.resize(got + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n <= 0) break;
  }
  if (gz)
    gzclose(gz);
  else
    ::close(fd);
  if (!error.ok()) return error;
  if (whole) *whole = out.size() <= max_bytes;
  if (out.size() > max_bytes) out.resize(max_bytes);
  return out;
}

Result<uint64_t> FingerprintPrefix(const std::string& path, uint64_t len) {
  Result<std::string> prefix = ReadPrefix(path, static_cast<size_t>(len));
  if (!prefix.ok()) return prefix.status();
  uint64_t h = 1469598103934665603ull;
  for (const char c : *prefix) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace collscope
