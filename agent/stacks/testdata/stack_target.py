"""Processes for the stack sampler's tests: each mode stays in a known place.

A line marked `# AT:<name>` is where the sampler must find the process. The process prints
"ready" once it is about to go there.
"""
import ctypes
import os
import sys
import threading
import time


def allow_tracing():
    # With Yama's ptrace_scope at 1 only an ancestor may trace; the CLI's sampler is a sibling.
    try:
        ctypes.CDLL(None).prctl(0x59616D61, ctypes.c_ulong(0xFFFFFFFFFFFFFFFF), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def stuck_here():
    threading.Event().wait()  # AT:stuck


def spin():
    x = 0
    while True:
        x += 1  # AT:spin


def blocked_in_native():
    r, _ = os.pipe()
    os.read(r, 1)  # AT:native


def compile_graph():
    x = 0
    while True:
        x = (x * 31 + 7) % 1000003  # AT:compile


def wait_for_peers():
    r, _ = os.pipe()
    os.read(r, 1)  # AT:wait


def forward():
    time.sleep(0.003)


def backward():
    time.sleep(0.004)


def optimizer_step():
    time.sleep(0.002)


def train():
    while True:
        forward()
        backward()
        optimizer_step()


def deadlocked():
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # AT:deadlock


def not_dumpable():
    # Same user, but no longer traceable by it (as a setuid program would be).
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    stuck_here()


def exit_soon():
    time.sleep(0.6)


def worker():
    threading.Event().wait()  # AT:worker


def with_worker():
    threading.Thread(target=worker, daemon=True).start()
    stuck_here()


MODES = {
    "stuck": stuck_here, "spin": spin, "native": blocked_in_native, "compile": compile_graph,
    "wait": wait_for_peers, "train": train, "deadlock": deadlocked, "exit": exit_soon,
    "worker": with_worker, "nodump": not_dumpable,
}

if __name__ == "__main__":
    allow_tracing()
    print("ready", flush=True)
    MODES[sys.argv[1]]()
