"""A number that only grows, shared by the processes of one machine through a memory-mapped
file: the workers of ``percolator serve --processes N`` keep the newest catalog version in one,
so that a worker sees DDL committed through another at its next statement instead of at its
next poll of the store.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
from pathlib import Path

_VALUE = struct.Struct("<q")


class SharedCounter:
    """One int64 in a file every process maps."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        self._map = mmap.mmap(fd, _VALUE.size)

    @classmethod
    def create(cls, path: Path) -> SharedCounter:
        """A new counter at 0 (the file must not exist), readable by this user only."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, _VALUE.size)
        return cls(path, fd)

    @classmethod
    def open(cls, path: Path) -> SharedCounter:
        """The counter another process created at ``path``."""
        return cls(path, os.open(path, os.O_RDWR))

    def read(self) -> int:
        """The value (an aligned 8-byte read: never half of a write; a hint, not a lock)."""
        return int(_VALUE.unpack_from(self._map)[0])

    def advance(self, value: int) -> None:
        """Raise the value to ``value`` (a smaller one leaves it as it is)."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            if value > self.read():
                _VALUE.pack_into(self._map, 0, value)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Unmap it."""
        self._map.close()
        os.close(self._fd)
