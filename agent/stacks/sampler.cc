#include "agent/stacks/sampler.h"

#include <cxxabi.h>
#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <libunwind-ptrace.h>
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cctype>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "agent/stacks/cpython_layout.h"
#include "agent/stacks/python_stacks.h"
#include "agent/stacks/remote_memory.h"

namespace collscope::stacks {
namespace {

constexpr size_t kSymbolCacheEntries = 65536;
constexpr int64_t kStopWaitUs = 200000;

int64_t NowUs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string ProcPath(pid_t pid, const char* what) {
  return "/proc/" + std::to_string(pid) + "/" + what;
}

std::vector<pid_t> ThreadsOf(pid_t pid) {
  std::vector<pid_t> tids;
  DIR* dir = opendir(ProcPath(pid, "task").c_str());
  if (!dir) return tids;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long tid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && tid > 0) tids.push_back(static_cast<pid_t>(tid));
  }
  closedir(dir);
  std::sort(tids.begin(), tids.end());
  return tids;
}

// The state letter of /proc/PID/task/TID/stat (after the parenthesised command, which may itself
// hold parentheses).
char ThreadState(pid_t pid, pid_t tid) {
  std::string stat =
      ReadFileText("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '?';
}

std::string PermissionHint() {
  std::string scope = Trimmed(ReadFileText("/proc/sys/kernel/yama/ptrace_scope"));
  std::string hint = "the process must be yours";
  if (!scope.empty() && scope != "0")
    hint += "; /proc/sys/kernel/yama/ptrace_scope is " + scope +
            " (1 lets only a parent trace its children: run as root or with CAP_SYS_PTRACE, set it"
            " to 0, or have the process call prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY))";
  hint += "; in a container, grant CAP_SYS_PTRACE (docker --cap-add SYS_PTRACE)";
  return hint;
}

std::string Demangled(const char* name) {
  if (!name) return "";
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status == 0 && d) {
      std::string out(d);
      std::free(d);
      return out;
    }
  }
  return name;
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// libunwind's remote unwinding, with the target's memory read by process_vm_readv rather than a
// PTRACE_PEEKDATA per word. Unwind tables and registers still come from libunwind-ptrace. The
// accessors find the thread being unwound through this pointer because libunwind-ptrace passes
// its own argument, not ours, to the accessors it calls.
struct UnwindTarget {
  void* upt = nullptr;
  const RemoteMemory* memory = nullptr;
};
thread_local UnwindTarget* g_unwinding = nullptr;

int FindProcInfo(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need, void*) {
  return _UPT_find_proc_info(as, ip, pi, need, g_unwinding->upt);
}
void PutUnwindInfo(unw_addr_space_t as, unw_proc_info_t* pi, void*) {
  _UPT_put_unwind_info(as, pi, g_unwinding->upt);
}
int GetDynInfoListAddr(unw_addr_space_t as, unw_word_t* addr, void*) {
  return _UPT_get_dyn_info_list_addr(as, addr, g_unwinding->upt);
}
int AccessMem(unw_addr_space_t, unw_word_t addr, unw_word_t* value, int write, void*) {
  if (write) return -UNW_EINVAL;
  return g_unwinding->memory->ReadValue(addr, value) ? 0 : -UNW_EINVAL;
}
int AccessReg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t* value, int write, void*) {
  return _UPT_access_reg(as, reg, value, write, g_unwinding->upt);
}
int AccessFpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t* value, int write, void*) {
  return _UPT_access_fpreg(as, reg, value, write, g_unwinding->upt);
}
int Resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }
int GetProcName(unw_addr_space_t as, unw_word_t ip, char* buf, size_t len, unw_word_t* off, void*) {
  return _UPT_get_proc_name(as, ip, buf, len, off, g_unwinding->upt);
}

Dwfl* NewDwfl(pid_t pid) {
  static char* debuginfo_path = nullptr;
  static const Dwfl_Callbacks callbacks = {dwfl_linux_proc_find_elf, dwfl_standard_find_debuginfo,
                                           nullptr, &debuginfo_path};
  Dwfl* dwfl = dwfl_begin(&callbacks);
  if (!dwfl) return nullptr;
  dwfl_report_begin(dwfl);
  if (dwfl_linux_proc_report(dwfl, pid) != 0 || dwfl_report_end(dwfl, nullptr, nullptr) != 0) {
    dwfl_end(dwfl);
    return nullptr;
  }
  return dwfl;
}

struct SymbolSearch {
  uint64_t runtime = 0, version = 0;
};

int FindPythonSymbols(Dwfl_Module* mod, void**, const char* name, Dwarf_Addr, void* arg) {
  auto* found = static_cast<SymbolSearch*>(arg);
  if (!name || !std::strstr(Basename(name).c_str(), "python")) return DWARF_CB_OK;
  int n = dwfl_module_getsymtab(mod);
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr = 0;
    const char* s = dwfl_module_getsym_info(mod, i, &sym, &addr, nullptr, nullptr, nullptr);
    if (!s) continue;
    if (!found->runtime && std::strcmp(s, "_PyRuntime") == 0) found->runtime = addr;
    if (!found->version && std::strcmp(s, "Py_Version") == 0) found->version = addr;
  }
  return found->runtime && found->version ? DWARF_CB_ABORT : DWARF_CB_OK;
}

// A Python file as people know it: a package's path inside site-packages, the standard library's
// as "python3.11/threading.py" (so a stuck frame's position can look past the standard library),
// anything else by its base name.
std::string ShortPythonPath(const std::string& path) {
  for (const char* packages : {"/site-packages/", "/dist-packages/"}) {
    size_t at = path.rfind(packages);
    if (at != std::string::npos) return path.substr(at + std::strlen(packages));
  }
  for (size_t at = path.find("/python"); at != std::string::npos;
       at = path.find("/python", at + 1)) {
    size_t end = path.find('/', at + 1);
    std::string dir =
        path.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    bool version = dir.size() > 6 && std::isdigit(static_cast<unsigned char>(dir[6])) &&
                   dir.find('.') != std::string::npos;
    if (version && end != std::string::npos) return path.substr(at + 1);
  }
  return Basename(path);
}

}  // namespace

std::string Frame::Label() const {
  if (kind == Kind::kPython)
    return function + " (" + ShortPythonPath(file) + ":" + std::to_string(line) + ")";
  if (!function.empty()) return function;
  std::ostringstream s;
  s << (file.empty() ? "?" : Basename(file)) << "+0x" << std::hex << address;
  return s.str();
}

namespace {
std::map<std::string, std::string> Environment(pid_t pid) {
  std::string env = ReadFileText(ProcPath(pid, "environ"));
  std::map<std::string, std::string> vars;
  for (size_t at = 0; at < env.size();) {
    size_t end = env.find('\0', at);
    if (end == std::string::npos) end = env.size();
    std::string entry = env.substr(at, end - at);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
    at = end + 1;
  }
  return vars;
}
}  // namespace

std::vector<pid_t> ProcessesOfJob(const std::string& job) {
  std::vector<pid_t> pids;
  DIR* dir = opendir("/proc");
  if (!dir) return pids;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    struct stat st {};
    if (end == e->d_name || *end != '\0' || pid <= 0 ||
        stat(ProcPath(static_cast<pid_t>(pid), "").c_str(), &st) != 0 || st.st_uid != geteuid())
      continue;
    auto vars = Environment(static_cast<pid_t>(pid));
    for (const char* name : {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "COLLSCOPE_JOB"}) {
      auto it = vars.find(name);
      if (it != vars.end() && it->second == job) {
        pids.push_back(static_cast<pid_t>(pid));
        break;
      }
    }
  }
  closedir(dir);
  // Not this command and its ancestors (run inside the job, they carry its variables too); and
  // where the launcher gave ranks, only ranked processes (not the job's shells and launchers).
  std::set<pid_t> own;
  for (pid_t p = getpid(); p > 1 && own.insert(p).second;) {
    std::string stat = ReadFileText(ProcPath(p, "stat"));
    size_t close = stat.rfind(')');
    if (close == std::string::npos) break;
    p = static_cast<pid_t>(std::strtol(stat.c_str() + close + 4, nullptr, 10));  // ") S <ppid>"
  }
  std::erase_if(pids, [&](pid_t p) { return own.count(p) > 0; });
  if (std::any_of(pids.begin(), pids.end(), [](pid_t p) { return RankFromEnvironment(p) >= 0; }))
    std::erase_if(pids, [](pid_t p) { return RankFromEnvironment(p) < 0; });
  std::sort(pids.begin(), pids.end());
  return pids;
}

int RankFromEnvironment(pid_t pid) {
  auto vars = Environment(pid);
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"}) {
    auto it = vars.find(name);
    if (it == vars.end()) continue;
    char* end = nullptr;
    long rank = std::strtol(it->second.c_str(), &end, 10);
    if (end != it->second.c_str() && *end == '\0' && rank >= 0 && rank < (1L << 30))
      return static_cast<int>(rank);
  }
  return -1;
}

class Sampler::Impl {
 public:
  Impl(pid_t pid, const SamplerOptions& options) : pid_(pid), options_(options), memory_(pid) {}
  ~Impl() {
    for (auto& [tid, upt] : upts_) _UPT_destroy(upt);
    if (address_space_) unw_destroy_addr_space(address_space_);
    if (dwfl_) dwfl_end(dwfl_);
  }

  Status Init(ProcessFacts* facts);
  Result<Sample> Take(StackError* error);

 private:
  struct Held {
    pid_t tid;
    int pending_signal;
  };
  Status Hold(pid_t tid, std::vector<Held>* held, StackError* error);
  void Release(const std::vector<Held>& held);
  std::vector<uint64_t> Unwind(pid_t tid, bool* truncated);
  Frame Symbolize(uint64_t address, bool innermost);
  std::vector<Frame> Merge(const std::vector<uint64_t>& native, const PythonThread* python,
                           bool* truncated);

  pid_t pid_;
  SamplerOptions options_;
  RemoteMemory memory_;
  Dwfl* dwfl_ = nullptr;
  bool reported_this_sample_ = false;
  unw_accessors_t accessors_{};
  unw_addr_space_t address_space_ = nullptr;
  std::unordered_map<pid_t, void*> upts_;
  std::optional<PythonStackReader> python_;
  std::unordered_map<uint64_t, std::pair<std::string, std::string>> symbols_;
  struct Blocked {
    std::string syscall;  // /proc/.../syscall when it was unwound
    std::vector<uint64_t> native;
    bool truncated;
  };
  std::unordered_map<pid_t, Blocked> blocked_;
  std::unordered_map<pid_t, std::string> names_;

  // "202 0x7f.. ... 0x7ffd.. 0x7f.." (number, arguments, user sp, pc) for a thread blocked in a
  // system call; "" for one running, stopped outside a system call, or unreadable.
  std::string BlockedSyscall(pid_t tid) const {
    std::string line = Trimmed(ReadFileText("/proc/" + std::to_string(pid_) + "/task/" +
                                            std::to_string(tid) + "/syscall"));
    return !line.empty() && std::isdigit(static_cast<unsigned char>(line[0])) ? line : "";
  }
};

Status Sampler::Impl::Init(ProcessFacts* facts) {
  struct stat st {};
  if (stat(ProcPath(pid_, "").c_str(), &st) != 0)
    return Status::NotFound("pid " + std::to_string(pid_) + ": no such process");
  if (st.st_uid != geteuid())
    return Status::IOError("pid " + std::to_string(pid_) + " belongs to user " +
                         std::to_string(st.st_uid) + ", not to you (" + std::to_string(geteuid()) +
                         "): collscope stacks samples only your own processes");
  char exe[4096];
  ssize_t n = readlink(ProcPath(pid_, "exe").c_str(), exe, sizeof(exe) - 1);
  facts->pid = pid_;
  facts->exe = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "?";
  std::string cmdline = ReadFileText(ProcPath(pid_, "cmdline"));
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  facts->command_line = Trimmed(cmdline);
  while (!facts->command_line.empty() && facts->command_line.back() == ' ')
    facts->command_line.pop_back();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  facts->host = host;
  facts->rank = RankFromEnvironment(pid_);

  // A first read tells a refused process from one we may trace before anything is stopped: its
  // memory map and a word at its first mapping need the same right as tracing it.
  const std::string maps = ReadFileText(ProcPath(pid_, "maps"));
  uint64_t probe = 0, low = std::strtoull(maps.c_str(), nullptr, 16);
  if (maps.empty() || (low && !memory_.ReadValue(low, &probe) && errno == EPERM))
    return Status::IOError("pid " + std::to_string(pid_) +
                         ": the kernel refused to read its memory (" + PermissionHint() + ")");
  dwfl_ = NewDwfl(pid_);
  if (!dwfl_) return Status::IOError("pid " + std::to_string(pid_) + ": cannot read its memory map");

  if (options_.native) {
    accessors_ = {FindProcInfo, PutUnwindInfo, GetDynInfoListAddr, AccessMem, AccessReg,
                  AccessFpreg,  Resume,        GetProcName};
    address_space_ = unw_create_addr_space(&accessors_, 0);
    if (!address_space_) return Status::IOError("libunwind: cannot create an address space");
    unw_set_caching_policy(address_space_, UNW_CACHE_GLOBAL);
  }

  if (!options_.python) {
    facts->python_unread = "Python frames not asked for";
    return Status::Ok();
  }
  SymbolSearch found;
  dwfl_getmodules(dwfl_, FindPythonSymbols, &found, 0);
#ifdef COLLSCOPE_HAVE_CPYTHON311
  const collscope_cpython_layout* layout = &collscope_cpython311_layout;
#else
  const collscope_cpython_layout* layout = nullptr;
#endif
  unsigned long version = 0;
  if (!found.runtime || !found.version) {
    facts->python_unread = "not a CPython process (no _PyRuntime and Py_Version symbols)";
  } else if (!memory_.ReadValue(found.version, &version)) {
    facts->python_unread = std::string("cannot read Py_Version: ") + std::strerror(errno);
  } else {
    facts->python_version = std::to_string(version >> 24) + "." +
                            std::to_string((version >> 16) & 0xFF) + "." +
                            std::to_string((version >> 8) & 0xFF);
    if (!layout) {
      facts->python_unread = "Python " + facts->python_version +
                             ": this build found no CPython headers, so reads no Python frames";
    } else if ((version >> 16) != (layout->version_hex >> 16)) {
      facts->python_unread = "Python " + facts->python_version + ": this build reads only " +
                             std::to_string(layout->version_hex >> 24) + "." +
                             std::to_string((layout->version_hex >> 16) & 0xFF) + " frames";
    } else {
      python_.emplace(memory_, found.runtime, *layout, options_.max_depth);
    }
  }
  if (!python_) facts->python_version.clear();
  return Status::Ok();
}

Status Sampler::Impl::Hold(pid_t tid, std::vector<Held>* held, StackError* error) {
  if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
    if (errno == ESRCH) return Status::Ok();  // the thread ended meanwhile
    int e = errno;
    *error = e == EPERM ? StackError::kPermissionDenied : StackError::kFailed;
    std::string tracer = ReadFileText(ProcPath(pid_, "status"));
    size_t at = tracer.find("TracerPid:");
    std::string traced_by = at == std::string::npos
                                ? ""
                                : Trimmed(tracer.substr(at + 10, tracer.find('\n', at) - at - 10));
    traced_by.erase(0, traced_by.find_first_not_of(" \t"));
    if (!traced_by.empty() && traced_by != "0")
      return Status::IOError("pid " + std::to_string(pid_) + " is already traced by pid " +
                           traced_by + " (a debugger or another sampler)");
    return Status::IOError("pid " + std::to_string(pid_) + ": ptrace refused (" + std::strerror(e) +
                         "; " + PermissionHint() + ")");
  }
  if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
    ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
    return Status::Ok();
  }
  // The stop is reported to us as the tracer; waited for with a bound, since a thread that exits
  // meanwhile, or a parent that reaps the stop first (a tracer that is also the parent), would
  // otherwise hold the sampler for ever.
  int status = 0;
  pid_t got = 0;
  int64_t deadline = NowUs(CLOCK_MONOTONIC) + kStopWaitUs;
  for (int tries = 0;
       (got = waitpid(tid, &status, __WALL | WNOHANG)) == 0 && NowUs(CLOCK_MONOTONIC) < deadline;
       ++tries) {
    if (tries < 200) {
      sched_yield();  // the stop usually lands within microseconds
    } else {
      timespec pause{0, 20000};
      nanosleep(&pause, nullptr);
    }
  }
  if (got != tid || !WIFSTOPPED(status)) {
    ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
    return Status::Ok();  // exited, or the stop never came: this thread is left out of the sample
  }
  // A signal that arrived first is delivered when the thread is let go.
  int sig = WSTOPSIG(status);
  bool interrupt_stop = (status >> 16) == PTRACE_EVENT_STOP;
  held->push_back({tid, interrupt_stop || sig == SIGTRAP ? 0 : sig});
  return Status::Ok();
}

void Sampler::Impl::Release(const std::vector<Held>& held) {
  for (const Held& h : held)
    ptrace(PTRACE_DETACH, h.tid, nullptr,
           reinterpret_cast<void*>(static_cast<intptr_t>(h.pending_signal)));
}

std::vector<uint64_t> Sampler::Impl::Unwind(pid_t tid, bool* truncated) {
  std::vector<uint64_t> ips;
  void*& upt = upts_[tid];
  if (!upt) upt = _UPT_create(tid);
  if (!upt) return ips;
  UnwindTarget target{upt, &memory_};
  g_unwinding = &target;
  unw_cursor_t cursor;
  if (unw_init_remote(&cursor, address_space_, &target) == 0) {
    while (ips.size() < options_.max_depth) {
      unw_word_t ip = 0;
      if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
      ips.push_back(ip);
      int step = unw_step(&cursor);
      if (step < 0) *truncated = true;
      if (step <= 0) break;
    }
    if (ips.size() >= options_.max_depth) *truncated = true;
  }
  g_unwinding = nullptr;
  return ips;
}

Frame Sampler::Impl::Symbolize(uint64_t address, bool innermost) {
  Frame f;
  f.kind = Frame::Kind::kNative;
  f.address = address;
  // A return address points after the call; the call itself is one byte earlier.
  uint64_t pc = innermost ? address : address - 1;
  auto it = symbols_.find(pc);
  if (it == symbols_.end()) {
    Dwfl_Module* mod = dwfl_addrmodule(dwfl_, pc);
    if (!mod && !reported_this_sample_) {  // a library loaded since the map was read
      reported_this_sample_ = true;
      dwfl_report_begin(dwfl_);
      dwfl_linux_proc_report(dwfl_, pid_);
      dwfl_report_end(dwfl_, nullptr, nullptr);
      mod = dwfl_addrmodule(dwfl_, pc);
    }
    std::pair<std::string, std::string> entry;
    if (mod) {
      const char* mainfile = nullptr;
      const char* name =
          dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, &mainfile, nullptr);
      entry.second = name ? name : "";
      GElf_Off offset = 0;
      GElf_Sym sym;
      entry.first =
          Demangled(dwfl_module_addrinfo(mod, pc, &offset, &sym, nullptr, nullptr, nullptr));
    }
    if (symbols_.size() >= kSymbolCacheEntries) symbols_.clear();
    it = symbols_.emplace(pc, std::move(entry)).first;
  }
  f.function = it->second.first;
  f.file = it->second.second;
  return f;
}

// One call of the evaluator runs the Python frames up to and including the next entry frame, so
// each _PyEval_EvalFrameDefault native frame, innermost first, stands for one such group.
std::vector<Frame> Sampler::Impl::Merge(const std::vector<uint64_t>& native,
                                        const PythonThread* python, bool* truncated) {
  std::vector<std::vector<Frame>> groups;
  if (python) {
    if (python->truncated) *truncated = true;
    for (const PythonFrame& p : python->frames) {
      if (groups.empty()) groups.emplace_back();
      Frame f;
      f.kind = Frame::Kind::kPython;
      f.function = p.function;
      f.file = p.file;
      f.line = p.line;
      groups.back().push_back(std::move(f));
      if (p.is_entry) groups.emplace_back();
    }
    if (!groups.empty() && groups.back().empty()) groups.pop_back();
  }
  std::vector<Frame> frames;
  size_t next_group = 0;
  for (size_t i = 0; i < native.size(); ++i) {
    Frame f = Symbolize(native[i], i == 0);
    if (f.function == "_PyEval_EvalFrameDefault" && next_group < groups.size()) {
      for (Frame& p : groups[next_group++]) frames.push_back(std::move(p));
      continue;
    }
    frames.push_back(std::move(f));
  }
  // Python frames no evaluator frame was found for (native frames off or unresolved) sit above
  // the native frames they were called from.
  if (next_group < groups.size()) {
    std::vector<Frame> rest;
    for (; next_group < groups.size(); ++next_group)
      for (Frame& p : groups[next_group]) rest.push_back(std::move(p));
    if (native.empty()) return rest;
    frames.insert(frames.end(), rest.begin(), rest.end());
  }
  return frames;
}

Result<Sample> Sampler::Impl::Take(StackError* error) {
  *error = StackError::kNone;
  Sample sample;
  sample.unix_us = NowUs(CLOCK_REALTIME);
  int64_t start = NowUs(CLOCK_MONOTONIC);
  reported_this_sample_ = false;
  memory_.Invalidate();
  std::vector<pid_t> tids = ThreadsOf(pid_);
  char process_state = ThreadState(pid_, pid_);
  if (tids.empty() || process_state == 'Z' || process_state == 'X') {  // gone, or a zombie
    *error = StackError::kTargetExited;
    return Status::NotFound("pid " + std::to_string(pid_) + " has exited");
  }
  std::vector<ThreadStack> threads;
  for (pid_t tid : tids) {
    ThreadStack t;
    t.tid = tid;
    auto name = names_.find(tid);  // a thread's name is read once
    if (name == names_.end())
      name = names_
                 .emplace(tid, Trimmed(ReadFileText("/proc/" + std::to_string(pid_) + "/task/" +
                                                    std::to_string(tid) + "/comm")))
                 .first;
    t.name = name->second;
    t.state = ThreadState(pid_, tid);
    threads.push_back(std::move(t));
  }

  // Thread states are listed without stopping anything (the list changes only when threads start
  // or end); then each thread is held alone, just while its own frames are read and unwound, so
  // no thread waits for the others' unwinding.
  std::unordered_map<uint64_t, PythonStackReader::ThreadState> python_state;
  if (python_) {
    auto states = python_->ListThreads();
    if (states.ok())
      for (const auto& st : *states) python_state[st.native_thread_id] = st;
  }
  size_t held_any = 0;
  for (ThreadStack& t : threads) {
    auto state = python_state.find(static_cast<uint64_t>(t.tid));
    std::optional<PythonThread> python;
    std::vector<uint64_t> native;
    bool truncated = false;
    // A thread blocked in the same system call, at the same user stack pointer and pc as when it
    // was last unwound, has the same native stack: it is not stopped again (idle threads cost one
    // file read). Its Python frames are read anyway, and kept only if it stayed blocked meanwhile.
    const std::string syscall = options_.native ? BlockedSyscall(t.tid) : "";
    bool reused = false;
    if (auto last = blocked_.find(t.tid);
        !syscall.empty() && last != blocked_.end() && last->second.syscall == syscall) {
      memory_.Invalidate();
      if (state != python_state.end()) python = python_->ReadFrames(state->second);
      reused = BlockedSyscall(t.tid) == syscall;
      if (reused) {
        native = last->second.native;
        truncated = last->second.truncated;
        ++held_any;
      } else {
        python.reset();
      }
    }
    if (options_.native && !reused) {
      std::vector<Held> held;
      int64_t hold_start = NowUs(CLOCK_MONOTONIC);
      Status st = Hold(t.tid, &held, error);
      if (!st.ok()) return st;
      if (held.empty()) continue;  // the thread ended
      ++held_any;
      memory_.Invalidate();  // other threads ran since the last one was read
      if (state != python_state.end()) python = python_->ReadFrames(state->second);
      native = Unwind(t.tid, &truncated);
      Release(held);
      int64_t held_us = NowUs(CLOCK_MONOTONIC) - hold_start;
      sample.stopped_us = std::max(sample.stopped_us, held_us);
      if (!syscall.empty())
        blocked_[t.tid] = {syscall, native, truncated};
      else
        blocked_.erase(t.tid);
    } else if (!options_.native && state != python_state.end()) {
      python = python_->ReadFrames(state->second);
    }
    t.frames = Merge(native, python ? &*python : nullptr, &truncated);
    t.truncated = truncated;
    if (!t.frames.empty() || options_.native) sample.threads.push_back(std::move(t));
  }
  if (options_.native && held_any == 0) {
    *error = StackError::kTargetExited;
    return Status::NotFound("pid " + std::to_string(pid_) + " has exited");
  }
  for (auto it = upts_.begin(); it != upts_.end();) {  // threads that ended
    if (!std::binary_search(tids.begin(), tids.end(), it->first)) {
      _UPT_destroy(it->second);
      it = upts_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(blocked_, [&](const auto& b) {
    return !std::binary_search(tids.begin(), tids.end(), b.first);
  });
  std::erase_if(names_, [&](const auto& n) {
    return !std::binary_search(tids.begin(), tids.end(), n.first);
  });
  sample.took_us = NowUs(CLOCK_MONOTONIC) - start;
  return sample;
}

Sampler::Sampler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Sampler::~Sampler() = default;

Result<std::unique_ptr<Sampler>> Sampler::Attach(pid_t pid, const SamplerOptions& options) {
  auto impl = std::make_unique<Impl>(pid, options);
  ProcessFacts facts;
  Status st = impl->Init(&facts);
  if (!st.ok()) return st;
  std::unique_ptr<Sampler> sampler(new Sampler(std::move(impl)));
  sampler->facts_ = std::move(facts);
  return sampler;
}

Result<Sample> Sampler::Take() { return impl_->Take(&last_error_); }

}  // namespace collscope::stacks
