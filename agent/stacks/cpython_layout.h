// Where CPython keeps what a stack sampler reads: byte offsets into the interpreter's own
// structures, taken at build time from the installed CPython headers (cpython311_layout.c), so the
// sampler reads another process's memory without linking or running Python.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct collscope_cpython_layout {
  unsigned long version_hex;  // PY_VERSION_HEX of the headers; only major.minor must match
  // _PyRuntimeState
  uint32_t runtime_interpreters_head;
  // PyInterpreterState
  uint32_t interp_next, interp_threads_head, interp_id;
  // PyThreadState
  uint32_t tstate_next, tstate_cframe, tstate_thread_id, tstate_native_thread_id;
  // _PyCFrame
  uint32_t cframe_current_frame;
  // _PyInterpreterFrame
  uint32_t frame_code, frame_previous, frame_prev_instr, frame_is_entry, frame_owner;
  // PyCodeObject
  uint32_t code_filename, code_qualname, code_linetable, code_firstlineno, code_code_adaptive;
  // PyBytesObject
  uint32_t bytes_size, bytes_data;
  // PyUnicodeObject: the state bit field's word, and where a compact string's characters begin
  uint32_t unicode_length, unicode_state, unicode_ascii_data, unicode_compact_data;
  // The owner value of a frame that belongs to a C call's shim, not to Python code (3.12+); -1
  // where there is none.
  int32_t frame_owner_c_stack;
};

// The layout of the CPython 3.11 whose headers were found at build time (defined only when the
// build found them, with COLLSCOPE_HAVE_CPYTHON311 set; without, the sampler reads native stacks
// only and says so).
extern const struct collscope_cpython_layout collscope_cpython311_layout;

#ifdef __cplusplus
}
#endif
