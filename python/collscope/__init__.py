"""collscope step/phase annotations for training loops.

    import collscope
    collscope.set_parallel(dp=(dp_rank, dp_size), tp=(tp_rank, tp_size), pp=(pp_rank, pp_size))
    for n, batch in enumerate(loader):
        with collscope.step(n):
            with collscope.phase("forward"):
                loss = model(batch)
            with collscope.phase("backward"):
                loss.backward()
            with collscope.phase("optimizer"):
                opt.step()

The calls go to libcollscope-annotate.so (capture/annotate/collscope_annotate.h): lock-free, no
system call, nothing allocated in C. Its writer thread leaves one <host>-pid<pid>.steps.jsonl per
process in $COLLSCOPE_DUMP_DIR (else $NCCL_INSPECTOR_DUMP_DIR, else ./collscope-dump), which
`collscope ingest` stores and `collscope diagnose` reads.

Standard library only. When the library cannot be found, one warning is printed and every call
becomes a no-op, so a training job never fails because of its annotations.
"""

import contextlib
import ctypes
import ctypes.util
import functools
import os
import warnings

__all__ = ["step", "phase", "micro_batch", "set_parallel", "phase_gpu_time", "flush", "dropped", "enabled",
           "library_path"]

_LIB_NAME = "libcollscope-annotate.so"
_lib = None
_lib_path = None
_warned = False


def _candidates():
    env = os.environ.get("COLLSCOPE_ANNOTATE_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, _LIB_NAME)                # installed or build-tree package
    yield os.path.join(here, os.pardir, os.pardir, "capture", "annotate", _LIB_NAME)  # build/python/..
    found = ctypes.util.find_library("collscope-annotate")
    if found:
        yield found


def _load():
    global _lib, _lib_path, _warned
    if _lib is not None or _warned:
        return _lib
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            # Global: the NCCL profiler plugin and the CUPTI library find the current step by
            # the library's symbols (dlsym of the whole process).
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
            continue
        i32, i64 = ctypes.c_int32, ctypes.c_int64
        lib.collscope_step_begin.argtypes = [i64]
        lib.collscope_step_end.argtypes = []
        lib.collscope_phase_begin.argtypes = [ctypes.c_char_p]
        lib.collscope_phase_end.argtypes = [ctypes.c_char_p]
        lib.collscope_micro_batch.argtypes = [i32]
        lib.collscope_set_parallel.argtypes = [i32] * 12
        lib.collscope_phase_gpu_time.argtypes = [i64, ctypes.c_char_p, ctypes.c_double]
        lib.collscope_flush.argtypes = []
        lib.collscope_annotate_dropped.argtypes = []
        lib.collscope_annotate_dropped.restype = ctypes.c_uint64
        _lib, _lib_path = lib, path
        return lib
    _warned = True
    warnings.warn("collscope: %s not found (%s); step/phase annotations are off"
                  % (_LIB_NAME, "; ".join(errors) or "set COLLSCOPE_ANNOTATE_LIB to its path"), RuntimeWarning,
                  stacklevel=3)
    return None


def enabled():
    """True when the annotation library is loaded (calls are recorded)."""
    return _load() is not None


def library_path():
    """The loaded library's path, or None."""
    _load()
    return _lib_path


def _name(s):
    return s.encode("utf-8", "replace") if isinstance(s, str) else s


class _Span(contextlib.ContextDecorator):
    """A context manager that is also a decorator: `with phase("x"):` or `@phase("x")`."""

    def __init__(self, begin, end):
        self._begin, self._end = begin, end

    def __enter__(self):
        self._begin()
        return self

    def __exit__(self, *exc):
        self._end()
        return False


def step(n):
    """Training step (iteration) n: `with collscope.step(n):`."""
    lib = _load()
    if lib is None:
        return _Span(lambda: None, lambda: None)
    n = int(n)
    return _Span(lambda: lib.collscope_step_begin(n), lib.collscope_step_end)


def phase(name):
    """A named phase (forward, backward, optimizer, data, or any name): `with collscope.phase("forward"):`."""
    lib = _load()
    if lib is None:
        return _Span(lambda: None, lambda: None)
    b = _name(name)
    return _Span(lambda: lib.collscope_phase_begin(b), lambda: lib.collscope_phase_end(b))


def micro_batch(index):
    """The micro-batch now being processed (0-based)."""
    lib = _load()
    return -1 if lib is None else lib.collscope_micro_batch(int(index))


def _pair(v):
    if v is None:
        return -1, -1
    if isinstance(v, int):
        return v, -1
    r, s = v
    return int(r), int(s)


def set_parallel(rank=None, world_size=None, dp=None, tp=None, pp=None, ep=None, cp=None):
    """The process's place in the job; each of dp/tp/pp/ep/cp is (rank, size) or a rank alone.
    rank and world_size default to the launcher's RANK / WORLD_SIZE."""
    lib = _load()
    if lib is None:
        return -1
    args = [-1 if rank is None else int(rank), -1 if world_size is None else int(world_size)]
    for v in (dp, tp, pp, ep, cp):
        args.extend(_pair(v))
    return lib.collscope_set_parallel(*args)


def phase_gpu_time(step_number, name, gpu_us):
    """GPU time of a phase of a step, measured afterwards (see collscope.torch_timing)."""
    lib = _load()
    return -1 if lib is None else lib.collscope_phase_gpu_time(int(step_number), _name(name), float(gpu_us))


def flush():
    """Writes everything recorded so far (it also happens every second and at exit)."""
    lib = _load()
    return -1 if lib is None else lib.collscope_flush()


def dropped():
    """Annotation events dropped because the library's ring was full."""
    lib = _load()
    return 0 if lib is None else int(lib.collscope_annotate_dropped())
