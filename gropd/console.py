"""A command's console when its reader goes away (`./reproduce.sh table1 | head`, a closed terminal's pipe).

Everything a run must keep is in its own files (status.json, metrics.jsonl, eval/, TensorBoard events); the
console only shows it. So a closed pipe is not a failure: the first write that finds the reader gone (EPIPE)
points that file descriptor at /dev/null and the write is done there, and every later write of this process and
of the children it starts from then on goes there too. Without this, the first progress line after `head`
exited raised BrokenPipeError inside a run: the grid stopped with exit 1, no message, a run left half started.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class ReaderGoneProof:
    """A text stream that writes through to `stream` and, when its reader is gone, to /dev/null instead."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def _retry_on_devnull(self, action: str, *args: Any) -> Any:
        try:
            return getattr(self._stream, action)(*args)
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
            return getattr(self._stream, action)(*args)  # what was buffered goes to /dev/null with it

    def write(self, text: str) -> int:
        return self._retry_on_devnull("write", text)

    def flush(self) -> None:
        self._retry_on_devnull("flush")

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, ...: the stream's own
        return getattr(self._stream, name)


def survive_a_closed_reader() -> None:
    """Make sys.stdout and sys.stderr ReaderGoneProof (once per process)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ReaderGoneProof):
            setattr(sys, name, ReaderGoneProof(stream))
