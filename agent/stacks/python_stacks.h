// Reads the Python call stacks of every thread of another process from its memory, the way a
// debugger would: _PyRuntime -> interpreters -> thread states -> frames -> code objects. It never
// takes the GIL and runs no code in the target. The target should be stopped (ptrace) for a
// consistent read; a running target can give a torn stack, which every loop here bounds.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/stacks/cpython_layout.h"
#include "agent/stacks/remote_memory.h"
#include "core/status.h"

namespace collscope::stacks {

struct PythonFrame {
  std::string function;  // the code object's qualified name
  std::string file;
  int line = 0;           // 0 when the location table has none for the current instruction
  bool is_entry = false;  // the first frame a C call into the evaluator ran (3.11's is_entry)
};

struct PythonThread {
  uint64_t native_thread_id = 0;    // the kernel's tid
  std::vector<PythonFrame> frames;  // innermost first
  bool truncated = false;           // deeper than the limit, or a link could not be read
};

class PythonStackReader {
 public:
  PythonStackReader(const RemoteMemory& memory, uint64_t runtime_address,
                    const collscope_cpython_layout& layout, size_t max_depth = 256);

  // Every thread state of every interpreter: its kernel tid and where its state is.
  struct ThreadState {
    uint64_t native_thread_id = 0, address = 0;
  };
  Result<std::vector<ThreadState>> ListThreads();
  // The frames of one thread state. Its thread should be stopped: a thread changes only its own
  // frames, so holding that one thread is enough for a consistent stack.
  PythonThread ReadFrames(const ThreadState& thread);

 private:
  struct CodeInfo {
    std::string function, file;
    int first_line = 0;
    std::vector<uint8_t> line_table;
  };
  const CodeInfo* Code(uint64_t address);
  std::string ReadString(uint64_t object);

  const RemoteMemory& memory_;
  uint64_t runtime_;
  collscope_cpython_layout layout_;
  size_t max_depth_;
  // Code objects are immutable while alive; the cache is cleared when full (bounded memory) and
  // an entry is checked against the object's name pointer, since a freed address can be reused.
  struct CachedCode {
    uint64_t name_object;
    CodeInfo info;
  };
  std::unordered_map<uint64_t, CachedCode> code_cache_;
};

// The source line of code unit `instruction` in a CPython 3.11 location table (Objects/
// locations.md), starting from first_line; 0 when the table has no line there.
int LineForInstruction(const std::vector<uint8_t>& table, int first_line, int64_t instruction);

}  // namespace collscope::stacks
