"""A catalog kernel's record: the knobs it was made with and the strategies applied in it.

The catalog keeps the records of the kernels it wrote as data (`RecordBook`, keyed by the
kernel without its record line); the `# catalog: {json}` line each kernel still carries is
provenance, read back (`read_provenance`) only for a kernel the catalog has no data for: a
run resumed from a stored run, or a message naming a kernel's knobs. This module is the
only one that knows that line's format: it writes it (`record_line`), reads it, and takes it
out of a kernel (`without_record`).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from htam_graph.catalog.knobs import Knobs

log = logging.getLogger(__name__)

_PREFIX = "# catalog: "
_LINE = re.compile(r"^# catalog: (.*)$", re.MULTILINE)
_LINE_WITH_END = re.compile(r"^# catalog: .*\n", re.MULTILINE)


@dataclass(frozen=True)
class CatalogRecord:
    """What a catalog kernel is: its knobs, the strategies applied to make it (in order), the
    catalog model that wrote it and the task's operator family."""

    knobs: Knobs
    applied: tuple[str, ...] = ()
    catalog: str = ""
    family: str = ""


def record_line(record: CatalogRecord) -> str:
    """The kernel's `# catalog:` line (without its line end)."""
    data = {
        "catalog": record.catalog,
        "family": record.family,
        "knobs": record.knobs.changed(),
        "applied": list(record.applied),
    }
    return _PREFIX + json.dumps(data, sort_keys=True)


def read_provenance(source: str | None) -> CatalogRecord | None:
    """The record a kernel's `# catalog:` line holds (the first one); None for a kernel
    without one, or with one this catalog cannot read (not JSON, or knobs it does not have)."""
    match = _LINE.search(source) if source else None
    if match is None:
        return None
    try:
        data = json.loads(match[1])
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return CatalogRecord(
            knobs=Knobs(**data.get("knobs", {})),
            applied=tuple(data.get("applied", [])),
            catalog=str(data.get("catalog", "")),
            family=str(data.get("family", "")),
        )
    except (ValueError, TypeError) as e:
        log.warning("a kernel's catalog record is not this catalog's (%s)", str(e).splitlines()[0])
        return None


def without_record(candidate: str) -> str:
    """A kernel without its `# catalog:` line (and that line's end)."""
    return _LINE_WITH_END.sub("", candidate)


class RecordBook:
    """The records of the kernels a catalog client wrote, by the kernel's text without its
    record line; a kernel it has none for is read from its `# catalog:` line."""

    def __init__(self) -> None:
        self._records: dict[str, CatalogRecord | None] = {}

    @staticmethod
    def _key(source: str) -> str:
        return without_record(source).rstrip()

    def note(self, source: str, record: CatalogRecord) -> None:
        """Keep the record of a kernel written; two different records for one text keep none
        (that text's own line then tells)."""
        key = self._key(source)
        if key in self._records and self._records[key] != record:
            self._records[key] = None
        else:
            self._records[key] = record

    def held(self, source: str) -> CatalogRecord | None:
        """The record kept for this kernel, None when none is."""
        return self._records.get(self._key(source))

    def of(self, source: str | None) -> CatalogRecord | None:
        """The kernel's record: the one kept, else the one its text carries."""
        if not source:
            return None
        return self.held(source) or read_provenance(source)
