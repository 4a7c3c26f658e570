// Reads a JSON-lines file in large blocks of complete lines, from an offset into its uncompressed
// content. Gzip files (name ending in .gz) are decompressed on the fly. A last line without its
// newline (a writer killed mid-line, or still writing) is never returned: the next ingest will
// read it once it is complete.
//
// Memory is bounded whatever the input: a line longer than kMaxLineBytes is skipped to its
// newline and returned as an `overlong` block for the caller to report, and a gzip file that
// expands past kMaxGzipRatio times its size (a decompression bomb) is read no further.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace collscope {

inline constexpr size_t kMaxLineBytes = size_t{16} << 20;
inline constexpr uint64_t kMaxGzipRatio = 200;  // Inspector JSON compresses 10-30x

struct LineBlock {
  const char* data = nullptr;  // complete lines, each ending in '\n'
  size_t size = 0;
  size_t readable = 0;  // bytes readable from data (size + zero padding for simdjson)
  uint64_t offset = 0;  // uncompressed offset of data[0] in the file
  // When non-zero, the block holds no data: it stands for one line of this many bytes (its
  // newline included) that was longer than kMaxLineBytes and was skipped.
  uint64_t overlong = 0;
};

class LineReader {
 public:
  // One reader serves many files in turn, so its block buffer is allocated once.
  // A gzip file may always expand to `gzip_floor_bytes`, and to kMaxGzipRatio times its size.
  explicit LineReader(size_t block_size = 8 << 20, uint64_t gzip_floor_bytes = uint64_t{1} << 30);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Starts reading `path` at uncompressed offset `start_offset`, closing any previous file.
  Status Open(const std::string& path, uint64_t start_offset);

  // Fills `block` with the next run of complete lines. Returns false at the end of the complete
  // lines; the block is valid until the next call.
  Result<bool> Next(LineBlock* block);

  // Uncompressed offset just past the last complete line returned.
  uint64_t consumed() const { return consumed_; }
  // Bytes after `consumed()` that form an incomplete last line (known once Next returned false).
  uint64_t pending() const { return pending_; }

 private:
  Result<size_t> ReadSome(char* dst, size_t n);
  Result<bool> SkipOverlong(LineBlock* block);
  void Close();
  void Grow();

  std::string path_;
  int fd_ = -1;
  gzFile gz_ = nullptr;
  std::unique_ptr<char[]> buf_;  // capacity_ + padding bytes; never zero-filled as a whole
  size_t capacity_ = 0;
  size_t carry_ = 0;       // bytes of an incomplete line kept at the front of buf_
  size_t tail_start_ = 0;  // where the incomplete tail after the last block starts
  size_t tail_size_ = 0;
  uint64_t consumed_ = 0;
  uint64_t pending_ = 0;
  uint64_t gzip_floor_ = 0;
  uint64_t compressed_size_ = 0;  // of a gzip file, for the expansion bound
  uint64_t decompressed_ = 0;
  bool eof_ = false;
  Status deferred_;  // a read error met after data: reported once the lines before it are out
};

bool IsGzipPath(const std::string& path);

// Up to `max_bytes` of the file's uncompressed content from its start (decompressed when the name
// ends in .gz, as LineReader reads it). `*whole`, when given, says whether that is all of it.
Result<std::string> ReadPrefix(const std::string& path, size_t max_bytes, bool* whole = nullptr);

// FNV-1a hash of the first `len` uncompressed bytes (fewer if the file is shorter); used to notice
// a file rewritten in place between two ingests.
Result<uint64_t> FingerprintPrefix(const std::string& path, uint64_t len);

}  // namespace collscope
