"""The generators' worker processes (Sudoku and maze `--workers`), which never outlive the build however it ends,
`kill -9` included: a killed build must not leave processes burning every core.

Only the standard library is imported here, on purpose: a worker unpickles its initializer from this module before it
runs it, so the worker is guarded a fraction of a second after it starts, not after seconds spent importing numpy and
torch (which it does for its first task). Had the parent died in between, the initializer sees it and exits.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.process import BaseProcess

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` processes started now, each of which dies with this process.

    spawn, not fork: the parent may hold threads (torch, tqdm) that fork would copy in a locked state. The workers are
    started with SIGINT ignored, a disposition they inherit and Python keeps: a Ctrl-C while they start would print a
    traceback from each."""
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    )
    # signal handlers can only be set in the main thread; None: a handler not set from Python, left alone
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    try:
        if previous is not None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        for _ in range(workers):  # each submit starts a worker while none is idle: all of them, as they start slowly
            pool.submit(int)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return pool


def die_with_parent(parent: int) -> None:
    """Worker initializer: exit when the parent process dies, and leave Ctrl-C to the parent.

    Linux: PR_SET_PDEATHSIG has the kernel send SIGKILL the moment the parent dies, even to a worker busy in C code
    that holds the GIL. Its caveat: the signal comes when the *thread* that started the worker ends, not the process.
    worker_pool starts every worker in the thread that calls it (spawn context, no max_tasks_per_child: the pool never
    starts one from its manager thread), and the builders call it from the thread that drives the generation, which
    shuts the pool down (the generator's `finally`) before it can end; so the signal means the parent died. Elsewhere,
    and as a second line on Linux, a daemon thread waits on multiprocessing's parent sentinel: a pipe whose write end
    only the parent holds, so it reads end-of-file once the parent is gone, whatever killed it.

    SIGINT is ignored: Ctrl-C reaches the whole process group, and a worker interrupted while it holds the pool's queue
    lock deadlocks the pool's shutdown; the parent stops the pool instead (workers end after their current task)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # no prctl in this C library: the watcher below still works
            pass
    if os.getppid() != parent:  # the parent died before this worker got here
        os._exit(1)
    parent_process = multiprocessing.parent_process()
    if parent_process is not None:
        threading.Thread(target=_exit_with, args=(parent_process,), name="parent-watch", daemon=True).start()


def _exit_with(parent_process: BaseProcess) -> None:
    parent_process.join()  # returns once the parent's sentinel pipe is closed: the parent has died
    os._exit(1)
