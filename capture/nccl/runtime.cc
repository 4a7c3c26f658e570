// Process-wide runtime: configuration, identity, output files, the writer thread and the
// in-flight state file. Nothing here runs on NCCL's hot path; init/finalize and the writer thread
// may lock and allocate. See plugin_core.h and docs/capture.md for the contracts and schemas.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "capture/nccl/plugin_core.h"

#ifndef COLLSCOPE_CAPTURE_VERSION
#define COLLSCOPE_CAPTURE_VERSION "dev"
#endif

namespace collscope::capture {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;
constexpr auto kAcquire = std::memory_order_acquire;
constexpr size_t kFlushBytes = 1 << 20;  // keeps the writer's buffer bounded
constexpr size_t kMaxFinalizedSnapshots = 64;

// Both are trivially destructible, so process exit cannot tear them down under the writer thread.
std::mutex g_mu;
Runtime* g_rt = nullptr;

// fork() after init (DataLoader workers, launchers) copies the runtime but not its writer thread.
// The child abandons the copy: it never joins, writes or frees it, and may start a fresh one.
bool g_atfork_registered = false;  // guarded by g_mu
void AtforkPrepare() { g_mu.lock(); }
void AtforkParent() { g_mu.unlock(); }
void AtforkChild() {
  g_rt = nullptr;
  g_mu.unlock();
}
// The log file is truncated once per process and path (as Inspector's "w"), then appended to
// when a later communicator re-creates the runtime.
char g_truncated_path[4096];

int EnvInt(const char* const* names, int fallback) {
  for (const char* const* n = names; *n != nullptr; ++n) {
    const char* v = std::getenv(*n);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && x >= 0 && x <= INT32_MAX) return static_cast<int>(x);
  }
  return fallback;
}

int QueryCudaDevice() {
  // The CUDA runtime is already loaded by the application when NCCL initialises a communicator;
  // we never load it ourselves (the plugin must work without CUDA).
  using GetDeviceFn = int (*)(int*);
  auto fn = reinterpret_cast<GetDeviceFn>(dlsym(RTLD_DEFAULT, "cudaGetDevice"));
  if (fn == nullptr) return -1;
  int dev = -1;
  if (fn(&dev) != 0) return -1;
  return dev;
}

// The GPU's UUID as Inspector names its .prom file (8-4-4-4-12 lowercase hex), from the CUDA
// driver only when the application already loaded it (RTLD_NOLOAD: we never load CUDA).
bool QueryGpuUuid(int device, std::string* out) {
  if (device < 0) return false;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  using DeviceGetFn = int (*)(int*, int);
  struct Uuid {
    unsigned char bytes[16];
  };
  using GetUuidFn = int (*)(Uuid*, int);
  auto get = reinterpret_cast<DeviceGetFn>(dlsym(lib, "cuDeviceGet"));
  auto uuid = reinterpret_cast<GetUuidFn>(dlsym(lib, "cuDeviceGetUuid_v2"));
  if (uuid == nullptr) uuid = reinterpret_cast<GetUuidFn>(dlsym(lib, "cuDeviceGetUuid"));
  bool ok = false;
  int dev = 0;
  Uuid u{};
  if (get != nullptr && uuid != nullptr && get(&dev, device) == 0 && uuid(&u, dev) == 0) {
    char b[40];
    const unsigned char* x = u.bytes;
    std::snprintf(b, sizeof(b),
                  "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", x[0],
                  x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12], x[13],
                  x[14], x[15]);
    *out = b;
    ok = true;
  }
  dlclose(lib);  // drops only the reference RTLD_NOLOAD added
  return ok;
}

// Replaces `path` atomically: writes `tmp` (same directory), then renames it over `path`, so a
// reader sees the old file or the new one, never a partial one. Not fsynced (the files are
// rewritten every period; a crash loses at most the latest). false: errno says why.
bool ReplaceFile(const std::string& tmp, const std::string& path, const std::string& data,
                 mode_t mode, std::string* err) {
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    *err = "cannot write '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  fchmod(fd, mode);  // readable by a node_exporter running as another user, whatever the umask
  const char* p = data.data();
  size_t left = data.size();
  int saved = 0;
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      saved = n < 0 ? errno : EIO;
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (close(fd) != 0 && saved == 0) saved = errno;
  if (saved != 0) {
    unlink(tmp.c_str());
    *err = "write to '" + tmp + "' failed: " + std::strerror(saved);
    return false;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    *err = "cannot rename to '" + path + "': " + std::strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

bool MkdirP(const std::string& path, std::string* err) {
  if (path.empty()) {
    *err = "empty path";
    return false;
  }
  std::string cur;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    cur = path.substr(0, j);
    i = j + 1;
    if (cur.empty() || cur == "." || cur == "..") continue;
    if (mkdir(cur.c_str(), 0777) != 0 && errno != EEXIST) {
      *err = cur + ": " + std::strerror(errno);
      return false;
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *err = path + " is not a directory";
    return false;
  }
  if (access(path.c_str(), W_OK | X_OK) != 0) {
    *err = path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

const char* ProxyStateName(int s) {
  switch (s) {
    case collscope_ncclProfilerProxyOpInProgress_v4:
      return "ProxyOpInProgress";
    case collscope_ncclProfilerProxyStepSendGPUWait:
      return "SendGPUWait";
    case collscope_ncclProfilerProxyStepSendPeerWait_v4:
      return "SendPeerWait";
    case collscope_ncclProfilerProxyStepSendWait:
      return "SendWait";
    case collscope_ncclProfilerProxyStepRecvWait:
      return "RecvWait";
    case collscope_ncclProfilerProxyStepRecvFlushWait:
      return "RecvFlushWait";
    case collscope_ncclProfilerProxyStepRecvGPUWait:
      return "RecvGPUWait";
    case -1:
      return "none";
    default:
      return "other";
  }
}

struct ProxySnap {
  int32_t op_index;
  uint32_t op_gen;
  int32_t channel, peer, n_steps, is_send, steps_started, steps_done, last_state;
  uint64_t trans_bytes, last_update_ns;
};

struct OpSnap {
  uint32_t index, gen;
  bool is_p2p;
  Func func;
  uint8_t n_channels;
  int32_t peer;
  uint64_t sn, msg_bytes, start_ns, enqueue_ns, started, stopped;
  PackedName algo, proto;
};

void AppendChannelList(uint64_t mask, std::string* out) {
  out->push_back('[');
  bool first = true;
  for (uint64_t b = mask; b != 0; b &= b - 1) {
    if (!first) out->push_back(',');
    first = false;
    AppendUint(static_cast<uint64_t>(__builtin_ctzll(b)), out);
  }
  out->push_back(']');
}

// Appends the JSON object describing one communicator and its in-flight operations.
void AppendCommState(const CommCtx& c, uint64_t now_ns, std::string* out) {
  std::vector<OpSnap> ops;
  for (uint32_t i = 0; i < c.pool_size; ++i) {
    const OpSlot& s = c.slots[i];
    if (s.state.load(std::memory_order_acquire) != kSlotBusy) continue;
    OpSnap o;
    o.index = i;
    o.gen = s.gen.load(std::memory_order_acquire);
    o.is_p2p = s.is_p2p.load(kAcquire) != 0;
    o.func = static_cast<Func>(s.func.load(kAcquire));
    o.n_channels = s.n_channels.load(kAcquire);
    o.peer = s.peer.load(kAcquire);
    o.sn = s.sn.load(kAcquire);
    o.msg_bytes = s.msg_bytes.load(kAcquire);
    o.start_ns = s.start_ns.load(kAcquire);
    o.enqueue_ns = s.enqueue_ns.load(kAcquire);
    o.started = s.ch_started.load(kAcquire);
    o.stopped = s.ch_stopped.load(kAcquire);
    o.algo.w[0] = s.algo[0].load(kAcquire);
    o.algo.w[1] = s.algo[1].load(kAcquire);
    o.proto.w[0] = s.proto[0].load(kAcquire);
    o.proto.w[1] = s.proto[1].load(kAcquire);
    // Seqlock-style validation without fences: fields are stored with release after the slot
    // was claimed, so reading any value of a newer occupant makes this re-check fail and the
    // recycled slot is skipped for this snapshot.
    if (s.state.load(std::memory_order_acquire) != kSlotBusy || s.gen.load(kAcquire) != o.gen) {
      continue;
    }
    ops.push_back(o);
  }
  std::sort(ops.begin(), ops.end(), [](const OpSnap& a, const OpSnap& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.sn < b.sn;
  });

  std::vector<ProxySnap> proxies;
  for (uint32_t i = 0; i < c.proxy_pool_size; ++i) {
    const ProxyEntry& e = c.proxies[i];
    if (e.state.load(std::memory_order_acquire) != kSlotBusy) continue;
    const uint32_t g = e.gen.load(std::memory_order_acquire);
    ProxySnap p{
        e.op_index.load(kAcquire),      e.op_gen.load(kAcquire),        e.channel.load(kAcquire),
        e.peer.load(kAcquire),          e.n_steps.load(kAcquire),       e.is_send.load(kAcquire),
        e.steps_started.load(kAcquire), e.steps_done.load(kAcquire),    e.last_state.load(kAcquire),
        e.trans_bytes.load(kAcquire),   e.last_update_ns.load(kAcquire)};
    if (e.state.load(std::memory_order_acquire) != kSlotBusy || e.gen.load(kAcquire) != g) {
      continue;
    }
    proxies.push_back(p);
  }

  out->append("{\"id\":");
  AppendHexId(c.ident.comm_id, out);
  out->append(",\"comm_name\":");
  AppendJsonString(c.ident.comm_name, out);
  out->append(",\"rank\":");
  AppendInt(c.ident.rank, out);
  out->append(",\"n_ranks\":");
  AppendInt(c.ident.nranks, out);
  out->append(",\"nnodes\":");
  AppendInt(c.ident.nnodes, out);
  out->append(",\"ops_started\":");
  AppendUint(c.ops_started.load(kRelaxed), out);
  out->append(",\"ops_completed\":");
  AppendUint(c.ops_completed.load(kRelaxed), out);
  out->append(",\"last_activity_ts_us\":");
  AppendUint(c.last_activity_ns.load(kRelaxed) / 1000, out);
  out->append(",\"coll_dropped_total\":");
  AppendUint(c.coll_dropped.load(kRelaxed), out);
  out->append(",\"p2p_dropped_total\":");
  AppendUint(c.p2p_dropped.load(kRelaxed), out);
  out->append(",\"untracked_total\":");
  AppendUint(c.untracked.load(kRelaxed), out);
  out->append(",\"inflight\":[");
  char nb[16];
  for (size_t k = 0; k < ops.size(); ++k) {
    const OpSnap& o = ops[k];
    if (k) out->push_back(',');
    out->append("{\"kind\":");
    out->append(o.is_p2p ? "\"p2p\"" : "\"coll\"");
    out->append(",\"op\":");
    AppendJsonString(FuncName(o.func), out);
    out->append(",\"sn\":");
    AppendUint(o.sn, out);
    out->append(",\"peer\":");
    AppendInt(o.peer, out);
    out->append(",\"msg_size_bytes\":");
    AppendUint(o.msg_bytes, out);
    out->append(",\"algo\":");
    AppendJsonString(UnpackName(o.algo, nb), out);
    out->append(",\"proto\":");
    AppendJsonString(UnpackName(o.proto, nb), out);
    out->append(",\"n_channels\":");
    AppendUint(o.n_channels, out);
    out->append(",\"start_ts_us\":");
    AppendUint(o.start_ns / 1000, out);
    out->append(",\"enqueue_ts_us\":");
    AppendUint(o.enqueue_ns / 1000, out);
    out->append(",\"age_us\":");
    AppendUint(now_ns > o.start_ns ? (now_ns - o.start_ns) / 1000 : 0, out);
    out->append(",\"n_channels_started\":");
    AppendUint(static_cast<uint64_t>(__builtin_popcountll(o.started)), out);
    out->append(",\"n_channels_stopped\":");
    AppendUint(static_cast<uint64_t>(__builtin_popcountll(o.stopped)), out);
    out->append(",\"channels_started\":");
    AppendChannelList(o.started, out);
    out->append(",\"channels_stopped\":");
    AppendChannelList(o.stopped, out);
    out->append(",\"proxy\":[");
    bool first = true;
    for (const ProxySnap& p : proxies) {
      if (p.op_index != static_cast<int32_t>(o.index) || p.op_gen != o.gen) continue;
      if (!first) out->push_back(',');
      first = false;
      out->append("{\"channel\":");
      AppendInt(p.channel, out);
      out->append(",\"peer\":");
      AppendInt(p.peer, out);
      out->append(",\"is_send\":");
      out->append(p.is_send ? "true" : "false");
      out->append(",\"n_steps\":");
      AppendInt(p.n_steps, out);
      out->append(",\"steps_started\":");
      AppendInt(p.steps_started, out);
      out->append(",\"steps_done\":");
      AppendInt(p.steps_done, out);
      out->append(",\"last_state\":");
      AppendJsonString(ProxyStateName(p.last_state), out);
      out->append(",\"trans_bytes\":");
      AppendUint(p.trans_bytes, out);
      out->append(",\"last_update_ts_us\":");
      AppendUint(p.last_update_ns / 1000, out);
      out->push_back('}');
    }
    out->append("]}");
  }
  out->append("]}");
}

}  // namespace

void Runtime::Log(collscope_ncclDebugLogLevel level, const std::string& msg) {
  if (logfn_ != nullptr) {
    logfn_(level, COLLSCOPE_NCCL_SUBSYS_PROFILE, __FILE__, __LINE__, "collscope: %s", msg.c_str());
  } else if (level == COLLSCOPE_NCCL_LOG_WARN) {
    std::fprintf(stderr, "collscope: %s\n", msg.c_str());
  }
}

void Runtime::Disable(const std::string& why) {
  if (!disabled_.exchange(true)) {
    Log(COLLSCOPE_NCCL_LOG_WARN,
        "profiler plugin disabled: " + why + " (NCCL continues without collscope capture)");
  }
}

bool Runtime::Setup(collscope_ncclDebugLogger_t logfn) {
  logfn_ = logfn;
  cfg_ = LoadConfig();
  for (const std::string& w : cfg_.warnings) Log(COLLSCOPE_NCCL_LOG_WARN, w);

  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
  proc_.hostname = host;
  proc_.pid = static_cast<uint32_t>(getpid());
  static const char* const kGlobal[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK",
                                        nullptr};
  static const char* const kLocal[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                       nullptr};
  proc_.global_rank = EnvInt(kGlobal, -1);
  proc_.local_rank = EnvInt(kLocal, -1);
  proc_.gpu = QueryCudaDevice();
  if (proc_.gpu < 0) proc_.gpu = proc_.local_rank;
  proc_.git_rev = std::string("collscope-") + COLLSCOPE_CAPTURE_VERSION;

  if (!cfg_.enable) {
    disabled_.store(true);
    Log(COLLSCOPE_NCCL_LOG_INFO, "disabled by COLLSCOPE_ENABLE=0");
    return false;
  }
  std::string err;
  if (!MkdirP(cfg_.dump_dir, &err)) {
    Disable("cannot use dump directory '" + cfg_.dump_dir + "': " + err);
    return false;
  }
  const std::string stem =
      cfg_.dump_dir + "/" + proc_.hostname + "-pid" + std::to_string(proc_.pid);
  log_path_ = stem + ".log";
  state_path_ = stem + ".inflight.json";
  state_tmp_path_ = cfg_.dump_dir + "/." + proc_.hostname + "-pid" + std::to_string(proc_.pid) +
                    ".inflight.json.tmp";
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  const bool first = log_path_ != g_truncated_path;
  if (first) flags |= O_TRUNC;
  log_fd_ = open(log_path_.c_str(), flags, 0666);
  if (log_fd_ < 0) {
    Disable("cannot open '" + log_path_ + "': " + std::strerror(errno));
    return false;
  }
  if (first) std::snprintf(g_truncated_path, sizeof(g_truncated_path), "%s", log_path_.c_str());
  struct stat st;
  if (fstat(log_fd_, &st) == 0 && S_ISREG(st.st_mode)) fchmod(log_fd_, 0666);
  if (cfg_.prom_interval_us >= 0) SetupProm();
  Log(COLLSCOPE_NCCL_LOG_INFO, std::string("profiler plugin ") + COLLSCOPE_CAPTURE_VERSION +
                                   " writing " + log_path_ + " and " + state_path_);
  return true;
}

void Runtime::SetupProm() {
  std::string err;
  if (!MkdirP(cfg_.prom_dir, &err)) {
    Log(COLLSCOPE_NCCL_LOG_WARN, "Prometheus textfile off: cannot use '" + cfg_.prom_dir + "': " + err);
    return;
  }
  // Inspector names the file after the GPU's UUID; without the CUDA driver in the process we
  // fall back to the process's own stem (unique per process on a shared directory too).
  std::string id;
  if (!QueryGpuUuid(proc_.gpu, &id)) id = proc_.hostname + "-pid" + std::to_string(proc_.pid);
  prom_path_ = cfg_.prom_dir + "/nccl_inspector_metrics_" + id + ".prom";
  // node_exporter reads only *.prom, so the temporary file is invisible to it.
  prom_tmp_path_ = cfg_.prom_dir + "/.nccl_inspector_metrics_" + id + ".prom.tmp";
  PromProcessLabels labels;
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') job = std::getenv("SLURM_JOBID");
  if (job != nullptr && *job != '\0') labels.slurm_job_id = job;
  labels.node = proc_.hostname;
  if (proc_.gpu >= 0) labels.gpu = "GPU" + std::to_string(proc_.gpu);
  prom_ = std::make_unique<PromTextfile>(std::move(labels), cfg_.prom_max_buckets,
                                         cfg_.require_kernel_timing, cfg_.prom_dump_stats);
  Log(COLLSCOPE_NCCL_LOG_INFO, "Prometheus textfile " + prom_path_ + " every " +
                                   std::to_string(cfg_.prom_interval_us / 1000) + " ms");
}

collscope_ncclResult_t Runtime::CommInit(void** context, uint64_t comm_id, int* mask,
                                         const char* comm_name, int nnodes, int nranks, int rank,
                                         collscope_ncclDebugLogger_t logfn) noexcept {
  if (context != nullptr) *context = nullptr;
  if (mask != nullptr) *mask = 0;
  if (context == nullptr) return collscope_ncclSuccess;
  try {
    std::lock_guard<std::mutex> glk(g_mu);
    if (!g_atfork_registered) {
      g_atfork_registered = pthread_atfork(&AtforkPrepare, &AtforkParent, &AtforkChild) == 0;
    }
    if (g_rt == nullptr) {
      auto* rt = new Runtime();
      rt->Setup(logfn);
      g_rt = rt;
    }
    Runtime* rt = g_rt;
    const bool active = !rt->disabled();
    CommIdentity id;
    id.comm_id = comm_id;
    id.comm_name = (comm_name != nullptr && *comm_name != '\0') ? comm_name : "unknown";
    id.rank = rank;
    id.nranks = nranks;
    id.nnodes = nnodes;
    auto ctx = std::make_unique<CommCtx>(rt, std::move(id), rt->cfg_, active);
    ctx->annotate_current =
        reinterpret_cast<CommCtx::AnnotateCurrentFn>(dlsym(RTLD_DEFAULT, "collscope_annotate_current"));
    if (active && !rt->writer_running_) rt->StartWriter();
    {
      std::lock_guard<std::mutex> lk(rt->mu_);
      if (rt->prom_) ctx->prom_group = rt->prom_->CommGroup(ctx->ident);
      rt->comms_.push_back(ctx.get());
    }
    ++rt->refs_;
    *context = ctx.release();
    if (mask != nullptr && !rt->disabled()) {
      int m = collscope_ncclProfileColl | collscope_ncclProfileKernelCh;
      if (rt->cfg_.enable_p2p) m |= collscope_ncclProfileP2p;
      if (rt->cfg_.proxy_events) m |= collscope_ncclProfileProxyOp | collscope_ncclProfileProxyStep;
      *mask = m;
    }
  } catch (...) {
    // Out of memory or thread creation failure: NCCL runs on without us for this communicator.
    if (mask != nullptr) *mask = 0;
  }
  return collscope_ncclSuccess;
}

collscope_ncclResult_t Runtime::CommFinalize(void* context) noexcept {
  if (context == nullptr) return collscope_ncclSuccess;
  try {
    std::lock_guard<std::mutex> glk(g_mu);
    auto* c = static_cast<CommCtx*>(context);
    // Only a live context of this process's runtime is looked into: one finalized already
    // (finalize called twice) is freed memory, and one inherited across fork() was abandoned.
    Runtime* rt = g_rt;
    if (rt == nullptr) return collscope_ncclSuccess;
    {
      std::lock_guard<std::mutex> lk(rt->mu_);
      if (std::find(rt->comms_.begin(), rt->comms_.end(), c) == rt->comms_.end())
        return collscope_ncclSuccess;
      if (c->active && !rt->disabled()) {
        // Final drain: unlike Inspector, nothing completed is lost at teardown.
        rt->DrainCommLocked(c);
        // Every finalized communicator is kept, not only those with ops in flight: after a
        // watchdog abort, the member that never joined the stuck collective has nothing in
        // flight, and without its entry nothing maps its communicator rank to this process.
        std::string snap;
        AppendCommState(*c, NowNs(), &snap);
        snap.insert(snap.size() - 1, ",\"finalize_ts_us\":" + std::to_string(NowNs() / 1000));
        auto& kept = rt->finalized_snapshots_;
        if (kept.size() >= kMaxFinalizedSnapshots) kept.erase(kept.begin());
        kept.push_back(std::move(snap));
      }
      rt->comms_.erase(std::remove(rt->comms_.begin(), rt->comms_.end(), c), rt->comms_.end());
    }
    delete c;
    if (--rt->refs_ == 0) {
      rt->StopWriter();
      {
        std::lock_guard<std::mutex> lk(rt->mu_);
        rt->WriteStateLocked("finalized");
        rt->RemovePromLocked();
      }
      if (rt->log_fd_ >= 0) close(rt->log_fd_);
      delete rt;
      g_rt = nullptr;
    }
  } catch (...) {
  }
  return collscope_ncclSuccess;
}

void Runtime::AtExit() noexcept {
  try {
    std::lock_guard<std::mutex> glk(g_mu);
    Runtime* rt = g_rt;
    if (rt == nullptr) return;
    // Communicators were never finalized (common at interpreter exit). Flush what completed and
    // leave a last state file; memory stays allocated because NCCL threads may still call us.
    rt->StopWriter();
    std::lock_guard<std::mutex> lk(rt->mu_);
    rt->DumpPassLocked();
    rt->WriteStateLocked("exiting");
    rt->RemovePromLocked();
  } catch (...) {
  }
}

void Runtime::StartWriter() {
  stop_ = false;
  writer_ = std::thread(&Runtime::WriterLoop, this);
  writer_running_ = true;
}

void Runtime::StopWriter() {
  if (!writer_running_) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
  writer_running_ = false;
}

void Runtime::WriterLoop() {
  using Clock = std::chrono::steady_clock;
  const auto kNever = Clock::time_point::max();
  const int64_t interval_us = cfg_.dump_interval_us;
  const auto state_period = std::chrono::milliseconds(cfg_.state_interval_ms);
  auto now = Clock::now();
  auto next_dump = interval_us > 0 ? now + std::chrono::microseconds(interval_us)
                                   : (interval_us == 0 ? now : kNever);
  auto next_state = cfg_.state_interval_ms > 0 ? now : kNever;
  // The textfile's first write comes one period after start, as Inspector's does.
  const auto prom_period = std::chrono::microseconds(cfg_.prom_interval_us);
  auto next_prom = prom_ && cfg_.prom_interval_us > 0 ? now + prom_period : kNever;
  // Between dumps the writer looks at the rings and drains them all when one is half full: at the
  // defaults (4,096 records, 1 s dumps) a communicator completing 10,000 operations a second would
  // otherwise overflow before its dump. Producers never signal: the hot path stays free of system
  // calls. The look comes sooner the faster the fullest ring fills (half its time to half full),
  // every 10-50 ms: an idle job wakes the writer 20 times a second, not 100, and a ring empty at
  // one look holds a burst of 40,000 operations a second until the next.
  const auto kMinFillCheck = std::chrono::milliseconds(10), kMaxFillCheck = std::chrono::milliseconds(50);
  auto fill_check = kMaxFillCheck;
  double last_fill = 0;
  auto last_look = now;
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    auto wake = std::min({next_dump, next_state, prom_ ? next_prom : kNever});
    if (interval_us > 0 && !disabled()) wake = std::min(wake, Clock::now() + fill_check);
    if (wake == kNever || disabled()) {
      cv_.wait(lk, [&] { return stop_; });
    } else {
      cv_.wait_until(lk, wake, [&] { return stop_; });
    }
    if (stop_) break;
    now = Clock::now();
    if (now < next_dump && interval_us > 0) {
      const double fill = MaxRingFillLocked();
      const double seconds = std::chrono::duration<double>(now - last_look).count();
      const double rate = seconds > 0 ? std::max(0.0, fill - last_fill) / seconds : 0;  // capacity per second
      fill_check = kMaxFillCheck;
      if (rate > 0) {
        const auto half_time = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::duration<double>(std::max(0.0, 0.5 - fill) / rate / 2));
        fill_check = std::clamp(half_time, kMinFillCheck, kMaxFillCheck);
      }
      last_fill = fill, last_look = now;
      if (fill >= 0.5) {
        DumpPassLocked();
        last_fill = 0;
      }
    }
    if (now >= next_dump) {
      const size_t n = DumpPassLocked();
      last_fill = 0, last_look = now;
      if (interval_us > 0) {
        next_dump = now + std::chrono::microseconds(interval_us);
      } else {
        // Continuous mode: go again at once while there is work, poll gently when idle.
        next_dump = n > 0 ? now : now + std::chrono::microseconds(200);
      }
    }
    if (now >= next_state) {
      WriteStateLocked("running");
      next_state = now + state_period;
    }
    if (prom_ && now >= next_prom) {
      WritePromLocked();
      next_prom = now + prom_period;
    }
  }
}

double Runtime::MaxRingFillLocked() const {
  double fill = 0;
  for (const CommCtx* c : comms_) {
    if (!c->active) continue;
    for (const auto* ring : {c->coll_ring.get(), c->p2p_ring.get()})
      if (ring != nullptr)
        fill = std::max(fill, static_cast<double>(ring->SizeApprox()) / static_cast<double>(ring->capacity()));
  }
  return fill;
}

size_t Runtime::DumpPassLocked() {
  if (disabled() || log_fd_ < 0) return 0;
  size_t n = 0;
  for (CommCtx* c : comms_) {
    if (c->active) n += DrainCommLocked(c);
    if (disabled()) return n;
  }
  return n;
}

bool Runtime::FlushLocked(std::string* text) {
  if (text->empty() || disabled()) return !disabled();
  if (!WriteAll(log_fd_, *text)) {
    Disable("write to '" + log_path_ + "' failed: " + std::strerror(errno));
    return false;
  }
  text->clear();
  return true;
}

size_t Runtime::DrainCommLocked(CommCtx* c) {
  if (log_fd_ < 0) return 0;
  const uint64_t dump_ts_us = NowNs() / 1000;
  DumpStats stats;
  std::string& records = records_buf_;
  records.clear();
  const std::string head = RecordHead(c->ident, proc_, dump_ts_us);
  auto drain = [&](BoundedRing<CompletedRecord>* ring, const ChannelTrace* traces,
                   uint64_t* count) {
    // At most one ring's worth per pass, so producers outrunning us cannot pin the writer.
    for (uint32_t i = 0; i < ring->capacity(); ++i) {
      const bool got = ring->TryPop([&](const CompletedRecord& r, uint32_t idx) {
        std::span<const ChannelTrace> tr;
        if (traces != nullptr) tr = {traces + static_cast<size_t>(idx) * kMaxChannels, r.n_traces};
        FormatRecord(head, c->ident, proc_, r, tr, c->verbose, &records);
        if (prom_) prom_->Add(c->prom_group, r);
      });
      if (!got) break;
      ++*count;
      // Bound the buffer; this pass's dump_stats line then follows the first chunk.
      if (records.size() >= kFlushBytes && !FlushLocked(&records)) return;
    }
  };
  drain(c->coll_ring.get(), c->coll_traces.get(), &stats.coll_records);
  drain(c->p2p_ring.get(), c->p2p_traces.get(), &stats.p2p_records);

  stats.coll_dropped_total = c->coll_dropped.load(kRelaxed);
  stats.p2p_dropped_total = c->p2p_dropped.load(kRelaxed);
  stats.coll_dropped_since_last = stats.coll_dropped_total - c->coll_dropped_reported;
  stats.p2p_dropped_since_last = stats.p2p_dropped_total - c->p2p_dropped_reported;
  c->coll_dropped_reported = stats.coll_dropped_total;
  c->p2p_dropped_reported = stats.p2p_dropped_total;
  if (prom_) prom_->AddDrops(stats.coll_dropped_since_last, stats.p2p_dropped_since_last);
  const bool new_drops = stats.coll_dropped_since_last + stats.p2p_dropped_since_last > 0;
  const bool any = stats.coll_records + stats.p2p_records > 0;
  buf_.clear();
  if ((cfg_.dump_stats == DumpStatsMode::kAlways && (any || new_drops)) ||
      (cfg_.dump_stats == DumpStatsMode::kDrops && new_drops)) {
    FormatDumpStats(c->ident, proc_, stats, dump_ts_us, &buf_);
  }
  // Two writes rather than a copy of every record behind the dump_stats line: a pass makes a few
  // writes per communicator, and the copy cost a memmove per record's bytes.
  if (FlushLocked(&buf_)) FlushLocked(&records);
  return stats.coll_records + stats.p2p_records;
}

void Runtime::WriteStateLocked(const char* status) {
  if (disabled() || cfg_.state_interval_ms <= 0) return;
  const uint64_t now = NowNs();
  std::string s;
  s.reserve(4096);
  s.append("{\"collscope_inflight_version\":1,\"hostname\":");
  AppendJsonString(proc_.hostname, &s);
  s.append(",\"pid\":");
  AppendUint(proc_.pid, &s);
  s.append(",\"global_rank\":");
  AppendInt(proc_.global_rank, &s);
  s.append(",\"local_rank\":");
  AppendInt(proc_.local_rank, &s);
  s.append(",\"gpu\":");
  AppendInt(proc_.gpu, &s);
  s.append(",\"heartbeat_ts_us\":");
  AppendUint(now / 1000, &s);
  s.append(",\"state_seq\":");
  AppendUint(++state_seq_, &s);
  s.append(",\"status\":");
  AppendJsonString(status, &s);
  s.append(",\"comms\":[");
  bool first = true;
  for (const CommCtx* c : comms_) {
    if (!c->active) continue;
    if (!first) s.push_back(',');
    first = false;
    AppendCommState(*c, now, &s);
  }
  s.append("],\"finalized_comms\":[");
  for (size_t i = 0; i < finalized_snapshots_.size(); ++i) {
    if (i) s.push_back(',');
    s.append(finalized_snapshots_[i]);
  }
  s.append("]}\n");

  std::string err;
  if (!ReplaceFile(state_tmp_path_, state_path_, s, 0644, &err)) Disable(err);
}

void Runtime::WritePromLocked() {
  if (!prom_ || disabled()) return;
  // The window ends now: what completed so far belongs to it, whatever the JSON interval.
  DumpPassLocked();
  if (!prom_) return;
  std::vector<PromInflight> inflight;
  inflight.reserve(comms_.size());
  for (const CommCtx* c : comms_) {
    if (!c->active) continue;
    PromInflight f;
    f.comm_name = c->ident.comm_name;
    for (uint32_t i = 0; i < c->pool_size; ++i) {
      const OpSlot& slot = c->slots[i];
      if (slot.state.load(kAcquire) != kSlotBusy) continue;
      const uint32_t gen = slot.gen.load(kAcquire);
      const uint64_t start = slot.start_ns.load(kAcquire);
      // A slot recycled meanwhile is skipped, as in the state file.
      if (slot.state.load(kAcquire) != kSlotBusy || slot.gen.load(kAcquire) != gen) continue;
      ++f.ops;
      if (start != 0 && (f.oldest_start_ns == 0 || start < f.oldest_start_ns)) f.oldest_start_ns = start;
    }
    inflight.push_back(std::move(f));
  }
  const std::string text = prom_->Render(inflight, NowNs());
  std::string err;
  if (!ReplaceFile(prom_tmp_path_, prom_path_, text, 0644, &err)) {
    // The textfile is optional: losing it must not stop the JSON capture.
    Log(COLLSCOPE_NCCL_LOG_WARN, "Prometheus textfile off: " + err);
    prom_.reset();
  }
}

void Runtime::RemovePromLocked() {
  if (!prom_path_.empty()) unlink(prom_path_.c_str());
}

bool Runtime::WriteAll(int fd, const std::string& data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = EIO;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace collscope::capture
