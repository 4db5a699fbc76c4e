"""glibc malloc settings for the long-running Kafka consumer (not the library).

Blocks above 512 bytes (dict and set tables of many traces, a poll's fetch
buffers, a part's encoded verdicts) come from the C allocator. glibc serves
big ones with their own ``mmap`` at first, but raises that threshold to the
size of every such block freed (up to 32 MiB): after the first fetch
buffer is freed, later ones, and every big table and buffer, are carved
from the heap instead, and the heap keeps the pages they free. A consumer
that closes 100 k quiet traces in one pass grew its heap from 31 to 50 MiB
while less than 40 MiB of it was in use, and that is where its peak RSS
came from.

A fixed threshold (``mallopt(M_MMAP_THRESHOLD)``, which also stops the
adjustment) gives every block of 256 KiB or more its own mapping, handed
back to the system when it is freed. Measured on ``kafka_idle.py --traces
100000``: the heap stayed at 10 MiB. The cost is a ``mmap``/``munmap`` per
big block, a few per poll of ten thousand records.

Only a process that is the CLI (``trajgrade.runtime.gc.own_process``) on glibc is
changed; a program that runs the consumer in-process keeps its allocator
as it is, and other C libraries are left alone.
"""

from __future__ import annotations

from typing import Final

from trajgrade.runtime.gc import is_own_process

__all__ = ("MMAP_THRESHOLD", "map_big_blocks")

#: Blocks at least this big get their own mapping (glibc's own starting value
#: is 128 KiB; half a fetch buffer's worth of small tables stays in the heap).
MMAP_THRESHOLD: Final = 256 * 1024
_M_MMAP_THRESHOLD: Final = -3  # glibc's malloc.h


def map_big_blocks() -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD``; True when it was
    set (the CLI's own process on glibc), else a no-op that says False."""
    if not is_own_process():
        return False
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):  # (no such library or symbol)
        return False
