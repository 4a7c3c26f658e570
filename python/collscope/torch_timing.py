"""GPU time per phase with CUDA events, read back one step later so the stream is never
synchronised.

    timer = collscope.torch_timing.GpuPhaseTimer()
    for n, batch in enumerate(loader):
        with collscope.step(n):
            with timer.phase("forward"):
                loss = model(batch)
            with timer.phase("backward"):
                loss.backward()
        timer.step_done(n)   # reports the phases of earlier steps whose events have completed

`timer.phase(name)` is collscope.phase(name) plus a pair of CUDA events on the current stream.
Without torch or CUDA it is collscope.phase alone, and nothing else happens.
"""

import contextlib

from collscope import phase as _phase
from collscope import phase_gpu_time

try:  # torch is optional
    import torch  # noqa: F401
    _cuda = torch.cuda.is_available()
except Exception:  # pragma: no cover - no torch here
    torch = None
    _cuda = False


class GpuPhaseTimer:
    def __init__(self, max_pending_steps=4):
        self._step = None
        self._pending = []  # (step, name, start_event, end_event)
        self._max_pending = max_pending_steps

    @contextlib.contextmanager
    def phase(self, name):
        with _phase(name):
            if not _cuda:
                yield
                return
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            try:
                yield
            finally:
                end.record()
                self._pending.append((self._step, name, start, end))

    def step_begin(self, n):
        self._step = n

    def step_done(self, n):
        """Reports every pending phase whose events completed; never waits for the GPU, except
        when more than max_pending_steps steps are outstanding."""
        self._step = n + 1
        keep = []
        oldest = n - self._max_pending
        for step, name, start, end in self._pending:
            step = n if step is None else step
            if end.query() or step <= oldest:
                if step <= oldest:
                    end.synchronize()
                phase_gpu_time(step, name, start.elapsed_time(end) * 1000.0)
            else:
                keep.append((step, name, start, end))
        self._pending = keep
