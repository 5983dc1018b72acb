"""One grading worker: `python -P -m eval.grading_worker FD` answers requests on the socket FD.

eval.grading.VerifierPool starts each worker as a fresh interpreter on this module, so a worker
never imports the caller's `__main__` (multiprocessing's spawn and forkserver workers do, which
breaks a script without an `if __name__ == "__main__":` guard and code piped to `python -`).

Protocol (multiprocessing Connection messages): the worker sends "ready" once math-verify is
loaded; then each request (gold, extracted) gets back judge(gold, extracted), False when
math-verify raises; None, end of file or a reset or broken connection (the parent closed its end,
exited or died: a Ctrl-C or SIGTERM) stops the worker quietly, as there is nobody left to answer.
SIGINT is ignored from the start (before math-verify loads): the parent decides when workers stop.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from multiprocessing.connection import Connection
from pathlib import Path


def limit_memory(extra_bytes: int) -> None:
    """On Linux, let the address space grow by at most `extra_bytes`, so an answer that makes sympy
    allocate without bound fails with MemoryError (graded incorrect) instead of exhausting the machine."""
    if os.path.exists("/proc/self/statm"):
        import resource

        mapped = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (mapped + extra_bytes, resource.RLIM_INFINITY))


def serve(conn: Connection) -> None:
    """Answer (gold, extracted) requests with judge() until None, end of file or a connection the parent dropped."""
    from eval.grading import WARM_UP, judge

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for gold, answer in WARM_UP:  # load math-verify's lazy parsers outside any deadline
        judge(gold, answer)
    try:
        conn.send("ready")
        while (request := conn.recv()) is not None:
            try:
                verdict = judge(*request)
            except Exception:  # a math-verify crash on one answer grades that answer incorrect
                verdict = False
            conn.send(verdict)
    except (EOFError, ConnectionError):  # the parent is gone (ConnectionResetError, BrokenPipeError)
        return


def main(fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_memory(4 << 30)
    serve(Connection(fd))


if __name__ == "__main__":
    main(int(sys.argv[1]))
