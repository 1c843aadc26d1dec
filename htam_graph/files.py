"""Writing a file so that a reader sees the old file or the new one, never half of one.

Every file the project writes for others to read (run records, bench tables and reports,
the cubin cache, scripts, exports) goes through here: the data is written to a temporary
file with a unique name in the same folder (so concurrent writers of the same path never
share one), flushed to disk, and renamed over the target with `os.replace`, which is atomic
within a file system. The temporary file is removed when writing fails.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Readable by everyone, as a file written with the usual umask would be: a sandboxed
# candidate running as nobody reads the cubin cache. Pass mode=0o600 for a private file.
DEFAULT_MODE = 0o644


@contextlib.contextmanager
def atomic_file(path: Path, mode: int = DEFAULT_MODE) -> Iterator[Path]:
    """A fresh temporary path next to `path` for the caller to write (by name: a library
    that takes a path, such as pandas or matplotlib, writes it); when the block ends
    without an exception it is synced and renamed over `path`, else removed. The
    temporary file exists, empty and readable by its owner only, until then; it gets
    `mode` when it is renamed. Creates `path`'s folder when missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        _sync(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, data: str | bytes, mode: int = DEFAULT_MODE) -> None:
    """Write `data` (text as UTF-8) to `path` atomically (see atomic_file)."""
    with atomic_file(path, mode) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)


def _sync(path: Path) -> None:
    """Flush the file's data to disk, so a crash after the rename cannot leave it empty."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
