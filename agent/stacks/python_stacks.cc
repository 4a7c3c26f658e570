#include "agent/stacks/python_stacks.h"

#include <cerrno>
#include <cstring>

namespace collscope::stacks {
namespace {

constexpr size_t kMaxInterpreters = 64;
constexpr size_t kMaxThreads = 4096;
constexpr size_t kMaxStringBytes = 1024;
constexpr size_t kMaxLineTable = 1 << 20;
constexpr size_t kCodeCacheEntries = 16384;

void AppendUtf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x110000) {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back('?');
  }
}

// The 6-bit little-endian varints of the location table: bit 6 says another byte follows.
struct TableCursor {
  const std::vector<uint8_t>& bytes;
  size_t at = 0;
  bool ok() const { return at < bytes.size(); }
  uint32_t Varint() {
    uint32_t value = 0;
    for (int shift = 0; at < bytes.size() && shift < 32; shift += 6) {
      uint8_t b = bytes[at++];
      value |= static_cast<uint32_t>(b & 63) << shift;
      if (!(b & 64)) break;
    }
    return value;
  }
  int32_t SignedVarint() {
    uint32_t u = Varint();
    return (u & 1) ? -static_cast<int32_t>(u >> 1) : static_cast<int32_t>(u >> 1);
  }
};

}  // namespace

int LineForInstruction(const std::vector<uint8_t>& table, int first_line, int64_t instruction) {
  if (instruction < 0) return first_line;  // a frame that has not started its first instruction
  TableCursor cur{table};
  int line = first_line;
  int64_t address = 0;
  while (cur.ok()) {
    uint8_t head = table[cur.at++];
    if (!(head & 0x80)) continue;  // not an entry's first byte: the table is damaged; resync
    int code = (head >> 3) & 15;
    int64_t length = (head & 7) + 1;
    bool has_line = true;
    if (code == 15) {
      has_line = false;
    } else if (code == 14) {
      line += cur.SignedVarint();
      cur.Varint();
      cur.Varint();
      cur.Varint();
    } else if (code == 13) {
      line += cur.SignedVarint();
    } else if (code >= 10) {
      line += code - 10;
      cur.at += 2;
    } else {
      cur.at += 1;
    }
    if (instruction < address + length) return has_line ? line : 0;
    address += length;
  }
  return 0;
}

PythonStackReader::PythonStackReader(const RemoteMemory& memory, uint64_t runtime_address,
                                     const collscope_cpython_layout& layout, size_t max_depth)
    : memory_(memory), runtime_(runtime_address), layout_(layout), max_depth_(max_depth) {}

std::string PythonStackReader::ReadString(uint64_t object) {
  int64_t length = 0;
  uint32_t state = 0;
  if (!memory_.ReadValue(object + layout_.unicode_length, &length) ||
      !memory_.ReadValue(object + layout_.unicode_state, &state) || length < 0)
    return "?";
  unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || kind == 0 || kind == 3 || kind > 4) return "?";
  size_t width = ascii ? 1 : kind;
  size_t count = std::min<size_t>(static_cast<size_t>(length), kMaxStringBytes / width);
  std::vector<uint8_t> raw(count * width);
  uint64_t data = object + (ascii ? layout_.unicode_ascii_data : layout_.unicode_compact_data);
  if (!memory_.Read(data, raw.data(), raw.size())) return "?";
  std::string out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t c = 0;
    std::memcpy(&c, raw.data() + i * width, width);  // little-endian code units
    AppendUtf8(c, &out);
  }
  return out;
}

const PythonStackReader::CodeInfo* PythonStackReader::Code(uint64_t address) {
  uint64_t name = 0;
  if (!memory_.ReadPointer(address + layout_.code_qualname, &name) || name == 0) return nullptr;
  auto it = code_cache_.find(address);
  if (it != code_cache_.end() && it->second.name_object == name) return &it->second.info;
  CodeInfo info;
  uint64_t file = 0, table = 0;
  int32_t first_line = 0;
  if (!memory_.ReadPointer(address + layout_.code_filename, &file) ||
      !memory_.ReadPointer(address + layout_.code_linetable, &table) ||
      !memory_.ReadValue(address + layout_.code_firstlineno, &first_line))
    return nullptr;
  info.function = ReadString(name);
  info.file = file ? ReadString(file) : "?";
  info.first_line = first_line;
  int64_t table_size = 0;
  if (table && memory_.ReadValue(table + layout_.bytes_size, &table_size) && table_size > 0 &&
      static_cast<size_t>(table_size) <= kMaxLineTable) {
    info.line_table.resize(static_cast<size_t>(table_size));
    if (!memory_.Read(table + layout_.bytes_data, info.line_table.data(), info.line_table.size()))
      info.line_table.clear();
  }
  if (code_cache_.size() >= kCodeCacheEntries) code_cache_.clear();
  auto& slot = code_cache_[address];
  slot = CachedCode{name, std::move(info)};
  return &slot.info;
}

Result<std::vector<PythonStackReader::ThreadState>> PythonStackReader::ListThreads() {
  std::vector<ThreadState> threads;
  uint64_t interp = 0;
  if (!memory_.ReadPointer(runtime_ + layout_.runtime_interpreters_head, &interp))
    return Status::IOError(std::string("cannot read _PyRuntime: ") + std::strerror(errno));
  for (size_t i = 0; interp && i < kMaxInterpreters; ++i) {
    uint64_t tstate = 0;
    if (!memory_.ReadPointer(interp + layout_.interp_threads_head, &tstate)) break;
    for (size_t t = 0; tstate && t < kMaxThreads; ++t) {
      ThreadState state;
      state.address = tstate;
      memory_.ReadValue(tstate + layout_.tstate_native_thread_id, &state.native_thread_id);
      threads.push_back(state);
      if (!memory_.ReadPointer(tstate + layout_.tstate_next, &tstate)) break;
    }
    if (!memory_.ReadPointer(interp + layout_.interp_next, &interp)) break;
  }
  return threads;
}

PythonThread PythonStackReader::ReadFrames(const ThreadState& state) {
  PythonThread thread;
  thread.native_thread_id = state.native_thread_id;
  uint64_t cframe = 0, frame = 0;
  if (memory_.ReadPointer(state.address + layout_.tstate_cframe, &cframe) && cframe)
    memory_.ReadPointer(cframe + layout_.cframe_current_frame, &frame);
  while (frame) {
    if (thread.frames.size() >= max_depth_) {
      thread.truncated = true;
      break;
    }
    uint64_t code = 0, prev_instr = 0, previous = 0;
    uint8_t is_entry = 0;
    if (!memory_.ReadPointer(frame + layout_.frame_code, &code) ||
        !memory_.ReadPointer(frame + layout_.frame_prev_instr, &prev_instr) ||
        !memory_.ReadValue(frame + layout_.frame_is_entry, &is_entry) ||
        !memory_.ReadPointer(frame + layout_.frame_previous, &previous)) {
      thread.truncated = true;
      break;
    }
    PythonFrame f;
    f.is_entry = is_entry != 0;
    if (const CodeInfo* info = code ? Code(code) : nullptr) {
      f.function = info->function;
      f.file = info->file;
      uint64_t first_unit = code + layout_.code_code_adaptive;
      int64_t instruction =
          (static_cast<int64_t>(prev_instr) - static_cast<int64_t>(first_unit)) / 2;
      f.line = LineForInstruction(info->line_table, info->first_line, instruction);
    } else {
      f.function = "?";
    }
    thread.frames.push_back(std::move(f));
    frame = previous;
  }
  return thread;
}

}  // namespace collscope::stacks
