"""The checksummed journal (:mod:`trajgrade.runtime.journal`) on real files:
recovery keeps exactly the intact prefix of what was appended and names
the first damaged byte; rotation and drop keep every record until it is
dropped; a killed writer's half record hides nothing appended before it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade.runtime.journal import Journal, JournalClosed, encode_record, recover

if TYPE_CHECKING:
    from pathlib import Path

payloads = st.lists(st.binary(max_size=300), max_size=20)


@settings(max_examples=60, deadline=None)
@given(records=payloads, cut=st.integers(min_value=0), flip=st.booleans())
def test_recovery_is_the_intact_prefix(
    records: list[bytes], cut: int, flip: bool
) -> None:
    """Cut a segment anywhere (or flip a bit there): recovery returns the
    records wholly before that byte, in order, and reports the damage at
    the start of the first record it spoils, never a wrong record."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        journal = Journal(d, "j", fsync=False)
        for r in records:
            journal.append(r)
        journal.close()
        path = Path(journal.path)
        data = path.read_bytes()
        at = cut % (len(data) + 1)
        if flip and at < len(data):
            damaged = bytearray(data)
            damaged[at] ^= 0x01
            path.write_bytes(bytes(damaged))
        else:
            path.write_bytes(data[:at])
        got = recover(d, "j")
        starts = [0]
        for r in records:
            starts.append(starts[-1] + len(encode_record(r)))
        intact = sum(1 for end in starts[1:] if end <= at)
        flipped = flip and at < len(data)
        if not flipped and at in starts:  # cut between records: a shorter journal
            assert (got.records, got.damage) == (records[:intact], [])
            return
        spoiled = starts[intact]
        assert got.records == records[:intact]
        assert [(dmg.path, dmg.offset) for dmg in got.damage] == [(str(path), spoiled)]


def test_rotate_and_drop_keep_records_until_dropped(tmp_path: Path) -> None:
    journal = Journal(str(tmp_path), "j", fsync=True)
    journal.append(b"a")
    old = journal.rotate()
    journal.append(b"b")
    assert recover(str(tmp_path), "j").records == [b"a", b"b"]
    journal.drop(old)
    assert recover(str(tmp_path), "j").records == [b"b"]
    held = journal.rotate()  # the segment holding b
    assert recover(str(tmp_path), "j").segments[:-1] == held
    journal.drop(held)
    assert journal.rotate() == []  # nothing new: no empty segment made
    assert len(recover(str(tmp_path), "j").segments) == 1
    journal.close()
    try:
        journal.append(b"c")
    except JournalClosed:
        pass
    else:
        raise AssertionError("an append after close must be refused")


def test_concurrent_appends_all_land(tmp_path: Path) -> None:
    """Group commit: eight threads appending with fsync lose nothing."""
    journal = Journal(str(tmp_path), "j", fsync=True)

    def writer(i: int) -> None:
        for n in range(50):
            journal.append(f"{i}:{n}".encode())

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    journal.close()
    got = recover(str(tmp_path), "j").records
    assert sorted(got) == sorted(
        f"{i}:{n}".encode() for i in range(8) for n in range(50)
    )


def test_a_writer_killed_mid_record_leaves_the_records_before_it(
    tmp_path: Path,
) -> None:
    """A real process appends records then half a record and is killed with
    SIGKILL: recovery has every whole record and names the half one."""
    script = f"""
import os, signal, sys
sys.path.insert(0, {os.path.dirname(os.path.dirname(__import__("trajgrade").__file__))!r})
from trajgrade.runtime.journal import Journal, encode_record
j = Journal({str(tmp_path)!r}, "j", fsync=False)
for n in range(100):
    j.append(b"record %d" % n)
os.write(os.open(j.path, os.O_WRONLY | os.O_APPEND), encode_record(b"x" * 100)[:50])
os.kill(os.getpid(), signal.SIGKILL)
"""
    done = subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
    assert done.returncode == -9
    got = recover(str(tmp_path), "j")
    assert got.records == [b"record %d" % n for n in range(100)]
    [damage] = got.damage
    assert damage.reason == "record cut short"
    assert str(damage).startswith(f"{damage.path}: damaged record at byte ")
