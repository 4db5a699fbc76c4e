"""The Kafka consumer's malloc setting belongs to the CLI process only.

Each case runs in its own Python process (the setting is process-wide and
cannot be undone): a 1 MiB block is allocated and freed, which by default
makes glibc serve the next block of nearly that size from its heap (it
raises its mmap threshold to the size freed); once ``map_big_blocks`` ran,
that block gets its own mapping (``mallinfo2().hblkhd``: mapped bytes), and
is handed back to the system when it is freed.
"""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="glibc's allocator only"
)

PROBE = """
import ctypes, sys
from trajgrade.runtime import gc as _gc
from trajgrade.runtime import malloc as _malloc

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
        "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
if sys.argv[1] == "cli":
    _gc.own_process()
print(_malloc.map_big_blocks())
block = bytearray(1 << 20)
del block
before = libc.mallinfo2().hblkhd
block = bytearray((1 << 20) - (64 << 10))
print(libc.mallinfo2().hblkhd - before >= (1 << 20) - (64 << 10))
"""


def _probe(mode: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.split()


def test_the_cli_process_maps_big_blocks() -> None:
    assert _probe("cli") == ["True", "True"]


def test_an_in_process_caller_keeps_its_allocator() -> None:
    """Without the entry point (tests, embedding) nothing changes: the
    second big block comes from the heap, as glibc does by default."""
    assert _probe("library") == ["False", "False"]
