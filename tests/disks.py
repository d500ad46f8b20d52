"""A real small disk for store faults: a tmpfs of a few MiB mounted where the store lives.

``fill()`` writes a junk file until the disk is full (``ENOSPC``), optionally giving back a few
KiB so that small writes still fit and large ones do not; ``free()`` deletes it, as an operator
who cleans up a full disk. Needs root and mount rights; tests skip where they are missing.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


class SmallDisk:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._junk = path / "junk.bin"

    def fill(self, leave: int = 0) -> None:
        """Fill the disk; then free ``leave`` bytes again (rounded to the disk's pages)."""
        fd = os.open(self._junk, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            block = b"\0" * 65536
            while True:
                try:
                    os.write(fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    if len(block) == 1:
                        break
                    block = block[: len(block) // 2]
            if leave:
                os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
        finally:
            os.close(fd)

    def free(self) -> None:
        self._junk.unlink(missing_ok=True)


@contextmanager
def small_disk(path: Path, size: str = "8m") -> Iterator[SmallDisk]:
    """Mount a tmpfs of ``size`` at ``path`` (created if needed) for the block's duration."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small disk needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield SmallDisk(path)
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(path)], capture_output=True)
