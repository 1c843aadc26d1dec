"""The one atomic write: a reader sees the old file or the new one, writers never share a
temporary file, and a failed write leaves nothing behind."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from htam_graph.files import atomic_file, atomic_write


def test_writes_text_and_bytes_and_makes_the_folder(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.txt"
    atomic_write(path, "héllo\n")
    assert path.read_text(encoding="utf-8") == "héllo\n"
    atomic_write(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["b.txt"]


def test_a_private_file_stays_private(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    with atomic_file(path, mode=0o600) as tmp:
        assert stat.S_IMODE(tmp.stat().st_mode) == 0o600  # already while it is written
        tmp.write_text("x")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    atomic_write(path, "old")
    with pytest.raises(RuntimeError), atomic_file(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the writer failed")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_concurrent_writers_of_one_path_never_share_a_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    temporaries: list[Path] = []
    barrier = threading.Barrier(4)

    def write(i: int) -> None:
        with atomic_file(path) as tmp:
            temporaries.append(tmp)
            barrier.wait(10)  # all four are open at once
            tmp.write_text(str(i) * 1000)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(temporaries)) == 4
    assert path.read_text() in {str(i) * 1000 for i in range(4)}
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]
