// The CUPTI side of libcollscope-cupti.so: a fixed pool of activity buffers handed to CUPTI, the
// processing of completed buffers into a Summarizer, and a writer thread that flushes CUPTI
// periodically and appends closed windows to the summary file (docs/cupti.md).
//
// CUPTI is reached only through a CuptiApi table: injection.cc fills it from the libcupti.so it
// opens, and the tests from a fake activity source that writes records in the installed CUPTI
// headers' layout, so both drive the same buffer-processing path.
//
// Never hurts the job: a refusal from CUPTI, an empty pool (the buffer request is declined and
// CUPTI counts the records it drops) or a file that cannot be written prints one warning and is
// counted; the process carries on. Nothing here runs on the kernel-launch path: CUPTI calls the
// buffer-request callback only when it needs a new buffer (a lock-free pop).
#pragma once

#include <cupti_activity.h>
#include <zlib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capture/cupti/summarizer.h"

namespace collscope::capture {

struct CuptiApi {
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*get_next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*get_num_dropped_records)(CUcontext, uint32_t, size_t*) = nullptr;  // optional
  CUptiResult (*get_result_string)(CUptiResult, const char**) = nullptr;           // optional
};

struct CollectorConfig {
  std::string dump_dir = "collscope-dump";
  uint64_t window_ns = 10'000'000'000;
  int flush_ms = 1000;
  size_t buffers = 16;
  size_t buffer_bytes = 1 << 20;
  bool gzip = true;  // .kernels.jsonl.gz, flushed to a readable point every tick
  std::string host;
  int64_t pid = 0;
  int32_t rank = -1, local_rank = -1, world_size = -1;
  // Finds the annotation library's step lookup (called every tick until it answers); null: never.
  using StepLookupFinder = StepAtFn (*)();
  StepLookupFinder find_step_at = nullptr;
  // Clock of the windows' closing (CUPTI's timestamps are CLOCK_REALTIME ns on Linux).
  uint64_t (*now_ns)() = nullptr;
  std::vector<std::string> warnings;  // about the environment, printed once at start
};

// Reads COLLSCOPE_DUMP_DIR (else NCCL_INSPECTOR_DUMP_DIR), COLLSCOPE_CUPTI_WINDOW_MS, _FLUSH_MS,
// _BUFFERS, _BUFFER_KB, _GZIP and the launcher's rank variables (RANK, LOCAL_RANK, WORLD_SIZE, else
// Open MPI's, Slurm's or PMI's).
CollectorConfig LoadCollectorConfig();

struct CollectorStats {
  uint64_t records = 0, activities = 0, untimed = 0, dropped_by_cupti = 0, buffers_refused = 0,
           invalid_records = 0, late = 0;
};

// A fixed set of 8-byte-aligned buffers; Take and Give never lock or allocate.
class BufferPool {
 public:
  BufferPool(size_t count, size_t bytes);
  uint8_t* Take();  // nullptr when every buffer is out
  void Give(uint8_t* buffer);
  size_t buffer_bytes() const { return bytes_; }

 private:
  size_t count_, bytes_;
  std::unique_ptr<uint64_t[]> memory_;
  std::unique_ptr<std::atomic<uint32_t>[]> next_;  // index + 1 of the next free buffer, 0: none
  std::atomic<uint64_t> head_{0};                  // (tag << 32) | (index + 1)
};

class Collector {
 public:
  // Registers the buffer callbacks, enables kernels (concurrent), memcpys and memsets, and starts
  // the writer thread. One collector per process; nullptr (with a warning printed) when CUPTI
  // refuses the callbacks.
  static Collector* Start(const CuptiApi& api, CollectorConfig config);
  // Flushes CUPTI (forced), writes every open window and the last stats, joins the writer.
  void Stop();

  CollectorStats stats();
  const std::string& path() const { return path_; }

 private:
  Collector(const CuptiApi& api, CollectorConfig config);
  static void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI OnBufferCompleted(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                         size_t valid);
  static bool StepAt(uint64_t unix_ns, int64_t* step);
  void Process(const CUpti_Activity* record);
  void Run();
  void Tick(bool final) noexcept;  // never throws into the writer thread or atexit
  void TickOrThrow(bool final);
  void Write(const std::string& text);
  bool WriteRaw(const char* data, size_t size);
  bool Deflate(const std::string& text, int flush);
  void Warn(const std::string& what);

  CuptiApi api_;
  CollectorConfig config_;
  BufferPool pool_;
  std::mutex mu_;  // summarizer_ and the counters below; never held while calling CUPTI
  Summarizer summarizer_;
  CollectorStats stats_;
  std::atomic<uint64_t> buffers_refused_{0};
  std::string last_stats_;
  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread writer_;
  int fd_ = -1;
  z_stream zs_{};
  bool deflating_ = false;
  bool disabled_ = false;
  std::string path_;
  std::atomic<bool> warned_{false};
};

}  // namespace collscope::capture
