// Offsets of CPython 3.11's internal structures, from its own headers (Py_BUILD_CORE exposes
// them). Compiled as C: the internal headers are not valid C++.
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#include <stddef.h>

#include "agent/stacks/cpython_layout.h"

#if PY_MAJOR_VERSION != 3 || PY_MINOR_VERSION != 11
#error "cpython311_layout.c needs the CPython 3.11 headers"
#endif

// The unicode state word follows the hash; its bits are not addressable, so its offset is the
// end of the hash field.
const struct collscope_cpython_layout collscope_cpython311_layout = {
    .version_hex = PY_VERSION_HEX,
    .runtime_interpreters_head = offsetof(_PyRuntimeState, interpreters.head),
    .interp_next = offsetof(PyInterpreterState, next),
    .interp_threads_head = offsetof(PyInterpreterState, threads.head),
    .interp_id = offsetof(PyInterpreterState, id),
    .tstate_next = offsetof(PyThreadState, next),
    .tstate_cframe = offsetof(PyThreadState, cframe),
    .tstate_thread_id = offsetof(PyThreadState, thread_id),
    .tstate_native_thread_id = offsetof(PyThreadState, native_thread_id),
    .cframe_current_frame = offsetof(_PyCFrame, current_frame),
    .frame_code = offsetof(_PyInterpreterFrame, f_code),
    .frame_previous = offsetof(_PyInterpreterFrame, previous),
    .frame_prev_instr = offsetof(_PyInterpreterFrame, prev_instr),
    .frame_is_entry = offsetof(_PyInterpreterFrame, is_entry),
    .frame_owner = offsetof(_PyInterpreterFrame, owner),
    .code_filename = offsetof(PyCodeObject, co_filename),
    .code_qualname = offsetof(PyCodeObject, co_qualname),
    .code_linetable = offsetof(PyCodeObject, co_linetable),
    .code_firstlineno = offsetof(PyCodeObject, co_firstlineno),
    .code_code_adaptive = offsetof(PyCodeObject, co_code_adaptive),
    .bytes_size = offsetof(PyVarObject, ob_size),
    .bytes_data = offsetof(PyBytesObject, ob_sval),
    .unicode_length = offsetof(PyASCIIObject, length),
    .unicode_state = offsetof(PyASCIIObject, hash) + sizeof(Py_hash_t),
    .unicode_ascii_data = sizeof(PyASCIIObject),
    .unicode_compact_data = sizeof(PyCompactUnicodeObject),
    .frame_owner_c_stack = -1,
};
