"""`htam memory export|import` files: written in version 3, read in versions 2 and 3, and
streamed both ways, so a memory of 10^6 steps never has to fit in the client at once.

Version 3 is JSON Lines: a header, one record per line under its section's name (sections
in SECTIONS order), and an end line with the number of records in each section, so a
file cut short is refused instead of imported as a smaller memory:

    {"format": "htam-graph/memory", "version": 3}
    {"globals": {"id": "memory_access", "name": "Memory Access", ...}}
    {"steps": {"id": "run-1:0", "run_id": "run-1", ...}}
    {"end": {"globals": 9, "locals": 50, "transitions": 18, "tasks": 1, "runs": 1, "steps": 6}}

Version 2 (the exports of htam-graph before it) is one JSON object with the format,
the version and one list per section; it is read piece by piece with
json.JSONDecoder.raw_decode over chunks of the file. NaN and Infinity are refused when
parsed, and every record is validated by its pydantic model (memory/models.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

from pydantic import ValidationError

from htam_graph.errors import BadInput
from htam_graph.memory.models import RECORD_TYPES, SECTIONS, Section, SnapshotChecker, SnapshotItem, SnapshotRecord

FORMAT = "htam-graph/memory"
VERSION = 3
READABLE_VERSIONS = (2, 3)
MAX_LINE = 16 * 2**20  # a record is at most a few MB (models.MAX_TEXT_LENGTH per text field)
_CHUNK = 2**16


class _JsonError(ValueError):
    """Malformed JSON in a version 2 file (ExportFile adds the path)."""


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a finite number")


class _LongInteger:
    """An integer literal too long to convert (Python's limit is 4300 digits): a value no
    field accepts, so the record's validation refuses it naming the field that holds it."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def _parse_int(text: str) -> int | _LongInteger:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= 4300 else _LongInteger(digits)


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_parse_int)


def write_export(items: Iterable[SnapshotItem], out: IO[str]) -> dict[Section, int]:
    """Write a memory's records (in SECTIONS order) as a version 3 file; returns the counts."""
    out.write(json.dumps({"format": FORMAT, "version": VERSION}) + "\n")
    counts: dict[Section, int] = dict.fromkeys(SECTIONS, 0)
    for section, record in items:
        out.write(f'{{"{section}":{record.model_dump_json()}}}\n')
        counts[section] += 1
    out.write(json.dumps({"end": counts}) + "\n")
    return counts


class ExportFile:
    """An export file to import: `check()` reads it all once and refuses it, naming the
    line (or list entry) and the field, before anything is written; `items()` then streams
    its validated records for the store to write."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def check(self) -> dict[Section, int]:
        """The number of records per section, once every record, id and reference passed."""
        checker = SnapshotChecker()
        for where, section, record in self._records():
            try:
                checker.add(section, record)
            except ValueError as e:
                self._fail(where, str(e))
        try:
            return checker.finish()
        except ValueError as e:
            self._fail("", str(e))

    def items(self) -> Iterator[SnapshotItem]:
        for _, section, record in self._records():
            yield section, record

    def _records(self) -> Iterator[tuple[str, Section, SnapshotRecord]]:
        try:
            with self.path.open(encoding="utf-8", newline="") as fh:
                reader = self._reader(fh)
                for where, section, data in reader:
                    yield where, section, self._validate(where, section, data)
        except UnicodeDecodeError as e:
            self._fail("", f"not UTF-8 text ({e.reason})")
        except _JsonError as e:
            self._fail("", str(e))
        except OSError as e:
            raise BadInput(f"cannot read {self.path}: {e.strerror or e}", path=self.path) from e

    def _reader(self, fh: IO[str]) -> Iterator[tuple[str, Section, Any]]:
        first = fh.readline(_CHUNK)
        header = _json_or_none(first) if first.endswith("\n") else None
        if isinstance(header, dict) and header.get("version") == VERSION:
            self._check_header(header, "line 1")
            return self._lines(fh)
        fh.seek(0)
        return self._version2(_StreamedJson(fh))

    def _check_header(self, header: dict, where: str) -> None:
        if header.get("format") != FORMAT:
            self._fail(where, f"not an htam-graph memory export (format {header.get('format')!r}, expected {FORMAT!r})")
        version = header.get("version")
        if version not in READABLE_VERSIONS:
            newer = isinstance(version, int) and version > VERSION
            hint = "written by a newer htam-graph: upgrade it" if newer else "not a version htam-graph ever wrote"
            self._fail(where, f"export format version {version!r} is {hint} (this one reads versions 2 and 3)")

    def _lines(self, fh: IO[str]) -> Iterator[tuple[str, Section, Any]]:
        counts: dict[str, int] = dict.fromkeys(SECTIONS, 0)
        number = 1
        while line := fh.readline(MAX_LINE + 1):
            number += 1
            where = f"line {number}"
            if len(line) > MAX_LINE:
                self._fail(where, f"longer than {MAX_LINE} characters")
            entry = self._decode(where, line)
            if not isinstance(entry, dict) or len(entry) != 1:
                self._fail(where, 'expected {"<section>": {record}} or the end line')
            [(key, value)] = entry.items()
            if key == "end":
                self._check_end(where, value, counts, fh.read(1))
                return
            if key not in SECTIONS:
                self._fail(where, f"unknown section {key!r} (sections: {', '.join(SECTIONS)})")
            counts[key] += 1
            yield where, key, value
        self._fail("", "the file ends before its end line: it was cut short; export it again")

    def _check_end(self, where: str, value: Any, counts: dict[str, int], rest: str) -> None:
        if rest.strip():
            self._fail(where, "records after the end line")
        if value != counts:
            self._fail(where, f"the end line counts {value}, but the file holds {counts}: export it again")

    def _version2(self, stream: _StreamedJson) -> Iterator[tuple[str, Section, Any]]:
        stream.expect("{", "an htam-graph memory export (a JSON object)")
        header: dict[str, Any] = {}
        seen: list[str] = []
        while (key := stream.next_key()) is not None:
            if key in ("format", "version"):
                header[key] = stream.value()
                continue
            if key not in SECTIONS:
                self._fail("", f"unexpected field {key!r}: not an htam-graph memory export")
            if "format" not in header or "version" not in header:
                self._fail("", "no format and version before the records: not an htam-graph memory export")
            if seen and SECTIONS.index(key) <= SECTIONS.index(seen[-1]):
                self._fail("", f"section {key!r} out of order (sections: {', '.join(SECTIONS)})")
            self._check_header(header, "header")
            seen.append(key)
            for i, value in enumerate(stream.array()):
                yield f"{key}[{i}]", key, value
        if "format" not in header or "version" not in header:
            self._fail("", "no format and version: not an htam-graph memory export")
        self._check_header(header, "header")
        stream.expect("", "nothing after the memory's closing brace")

    def _decode(self, where: str, text: str) -> Any:
        try:
            return _DECODER.decode(text)
        except ValueError as e:
            self._fail(where, f"not valid JSON ({_first_line(e)})")

    def _validate(self, where: str, section: Section, data: Any) -> SnapshotRecord:
        model = RECORD_TYPES[section]
        try:
            return model.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(record)"
            self._fail(where, f"{section} field {field}: {err['msg']}")

    def _fail(self, where: str, problem: str) -> NoReturn:
        raise BadInput(f"{self.path}: {where + ': ' if where else ''}{problem}", value=where or None, path=self.path)


class _StreamedJson:
    """One JSON document read piece by piece: whitespace and punctuation by hand, every
    value by raw_decode over a buffer that grows only as far as that value needs."""

    def __init__(self, fh: IO[str]) -> None:
        self._fh = fh
        self._buf = ""
        self._pos = 0
        self._eof = False

    def expect(self, char: str, what: str) -> None:
        """Consume `char` (the empty string: the end of the file)."""
        found = self._peek()
        if found != char:
            raise _JsonError(f"expected {what}, found {found or 'the end of the file'!r}")
        self._pos += len(char)

    def next_key(self) -> str | None:
        """The next key of the object being read, or None after its closing brace."""
        char = self._peek()
        if char == "}":
            self._pos += 1
            return None
        if char == ",":
            self._pos += 1
        key = self.value()
        if not isinstance(key, str):
            raise _JsonError(f"expected a field name, found {key!r}")
        self.expect(":", "':' after a field name")
        return key

    def array(self) -> Iterator[Any]:
        self.expect("[", "a list")
        if self._peek() == "]":
            self._pos += 1
            return
        while True:
            yield self.value()
            char = self._peek()
            self._pos += 1
            if char == "]":
                return
            if char != ",":
                raise _JsonError(f"expected ',' or ']' in a list, found {char or 'the end of the file'!r}")

    def value(self) -> Any:
        self._peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as e:
                if self._eof:
                    raise _JsonError(f"not valid JSON ({_first_line(e)})") from None
                self._fill()
                continue
            except ValueError as e:  # NaN or Infinity
                raise _JsonError(str(e)) from None
            if end == len(self._buf) and not self._eof:
                self._fill()  # a number may go on in the next chunk
                continue
            if end - self._pos > MAX_LINE:
                raise _JsonError(f"a record longer than {MAX_LINE} characters")
            self._pos = end
            return value

    def _peek(self) -> str:
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in " \t\r\n":
                self._pos += 1
            if self._pos < len(self._buf) or self._eof:
                return self._buf[self._pos : self._pos + 1]
            self._fill()

    def _fill(self) -> None:
        if len(self._buf) - self._pos > MAX_LINE:
            raise _JsonError(f"a record longer than {MAX_LINE} characters")
        chunk = self._fh.read(_CHUNK)
        self._eof = not chunk
        self._buf = self._buf[self._pos :] + chunk
        self._pos = 0


def _json_or_none(text: str) -> Any:
    try:
        return _DECODER.decode(text)
    except ValueError:
        return None


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__
