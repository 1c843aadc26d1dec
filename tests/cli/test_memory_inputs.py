"""Bad import files and bad settings, as a user (or an attacker) hands them to `htam`:
each is one line on stderr, exit code 2, and nothing written (the store file is never
even created: the whole file is checked before a store is opened)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from htam_graph.memory.export_file import write_export
from htam_graph.memory.seed import DEFAULT_BANK
from htam_graph.memory.sqlite_store import SQLiteStore
from tests.cli.test_memory_cli import htam
from tests.memory.test_store_conformance import LOCAL_OF, G, make_step, seeded

Lines = list[str]


@pytest.fixture(scope="module")
def good_lines(tmp_path_factory) -> Lines:
    """A valid version 3 export: the seed bank, one task, one run, three steps."""
    folder = tmp_path_factory.mktemp("good")
    with SQLiteStore(folder / "memory.sqlite") as store:
        seeded(store)
        for i in range(3):
            store.record_step(make_step(i, [G[0]] if i else [], G[i + 1], 0.5))
        with (folder / "memory.jsonl").open("w") as fh:
            write_export(store.iter_records(), fh)
    return (folder / "memory.jsonl").read_text().splitlines(keepends=True)


def first(lines: Lines, section: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(f'{{"{section}":'))


def record(lines: Lines, section: str, index: int = 0) -> dict:
    return json.loads(lines[first(lines, section) + index])[section]


def with_record(section: str, change: Callable[[dict], None], index: int = 0) -> Callable[[Lines], Lines]:
    """Change one record (and keep the end line's counts right)."""

    def edit(lines: Lines) -> Lines:
        out = list(lines)
        at = first(out, section) + index
        data = json.loads(out[at])[section]
        change(data)
        out[at] = json.dumps({section: data}) + "\n"
        return out

    return edit


def duplicated(section: str) -> Callable[[Lines], Lines]:
    def edit(lines: Lines) -> Lines:
        at = first(lines, section)
        end = json.loads(lines[-1])
        end["end"][section] += 1
        return [*lines[: at + 1], lines[at], *lines[at + 1 : -1], json.dumps(end) + "\n"]

    return edit


def replaced(old: str, new: str, section: str = "globals") -> Callable[[Lines], Lines]:
    def edit(lines: Lines) -> Lines:
        out = list(lines)
        at = first(out, section)
        assert old in out[at]
        out[at] = out[at].replace(old, new, 1)
        return out

    return edit


def step_set(**values: object) -> Callable[[Lines], Lines]:
    return with_record("steps", lambda s: s.update(values), index=1)


CASES: dict[str, tuple[Callable[[Lines], Lines] | bytes | str, str]] = {
    # not an export of ours, or of a version this one cannot read
    "another JSON": ('{"foo": 1}\n', "unexpected field 'foo': not an htam-graph memory export"),
    "a JSON list": ("[1, 2]\n", "expected an htam-graph memory export"),
    "an empty file": ("", "expected an htam-graph memory export"),
    "YAML": (DEFAULT_BANK.read_text(), "expected an htam-graph memory export (a JSON object), found '#'"),
    "binary": (b"\x89PNG\r\n\x1a\n\xff\xfe", "not UTF-8"),
    "another format's header": ('{"format": "other/thing", "version": 3}\n', "not an htam-graph memory export"),
    "a future version": (
        lambda lines: ['{"format": "htam-graph/memory", "version": 4}\n', *lines[1:]],
        "version 4 is written by a newer htam-graph",
    ),
    "a future version 2-style": (
        '{"format": "htam-graph/memory", "version": 7, "globals": []}',
        "version 7 is written by a newer htam-graph",
    ),
    # duplicate ids of every kind
    "a duplicated global": (duplicated("globals"), "duplicate global id"),
    "a duplicated local": (duplicated("locals"), "duplicate local id"),
    "a duplicated transition": (duplicated("transitions"), "duplicate transition"),
    "a duplicated task": (duplicated("tasks"), "duplicate task id"),
    "a duplicated run": (duplicated("runs"), "duplicate run id"),
    "a duplicated step": (duplicated("steps"), "duplicate step id"),
    # references
    "a prefix naming an unknown global": (step_set(prefix=["warp_magic"]), "unknown global 'warp_magic'"),
    "a local of another global": (step_set(local_id=LOCAL_OF[G[5]]), f"belongs to '{G[5]}'"),
    "a step of a task that is missing": (step_set(task_id="no-such-task"), "is not its run's task"),
    "a step of an unknown run": (step_set(run_id="no-such-run"), "unknown run 'no-such-run'"),
    "a run of an unknown task": (with_record("runs", lambda r: r.update(task_id="gone")), "unknown task 'gone'"),
    "a local under an unknown global": (
        with_record("locals", lambda loc: loc.update(global_id="zz", id="zz.x")),
        "unknown global 'zz'",
    ),
    "a transition from an unknown global": (
        with_record("transitions", lambda t: t.update(source="zz")),
        "unknown global 'zz'",
    ),
    # numbers
    "NaN in a statistic": (replaced('"reward_sum":0.0', '"reward_sum":NaN'), "NaN is not a finite number"),
    "Infinity in a prior": (replaced('"prior":0.1', '"prior":Infinity'), "Infinity is not a finite number"),
    "1e999 in a statistic": (replaced('"reward_sum":0.0', '"reward_sum":1e999'), "finite number"),
    "an integer beyond 64 bits": (replaced('"attempts":0', f'"attempts":{2**64}'), "less than or equal to"),
    "an integer too long to parse": (
        replaced('"attempts":0', '"attempts":' + "9" * 5000),
        "line 2: globals field attempts: Input should be a valid integer",
    ),
    "an integer too long to parse in a step": (
        replaced('"index":0', '"index":' + "1" * 5000, section="steps"),
        "steps field index: Input should be a valid integer",
    ),
    # two steps of one run at one index (the run would show two steps 0 and none at 1)
    "two steps of a run at one index": (
        step_set(index=0),
        "line 82: step 'run-1:1': field index: run 'run-1' already has a step at index 0",
    ),
    "a sum its count cannot reach": (replaced('"reward_sum":0.0', '"reward_sum":5.0'), "exceeds what 0 attempts"),
    "1e999 in a run's own settings": (
        replaced('"steps":3', '"steps":3,"temperature":1e999', section="runs"),
        "temperature: inf is not a finite number",
    ),
    # ids and text both stores accept
    "an id over the limit": (step_set(id="s" * 1025), "at most 1024 characters"),
    "a control character in an id": (step_set(id="run-1:\x01"), "should match pattern"),
    "a lone surrogate": (with_record("tasks", lambda t: t.update(name="\ud800")), "valid string"),
    "text over the limit": (with_record("tasks", lambda t: t.update(name="x" * 100_001)), "at most 100000"),
    # the file's own structure
    "a file cut short": (lambda lines: lines[:-3], "cut short"),
    "an end line that miscounts": (
        lambda lines: [*lines[:-1], lines[-1].replace('"steps": 3', '"steps": 4')],
        "the end line counts",
    ),
    "sections out of order": (
        lambda lines: [*lines[:-1], lines[first(lines, "globals")], lines[-1]],
        "globals must come before steps",
    ),
    "records after the end line": (lambda lines: [*lines, lines[1]], "records after the end line"),
    "an unknown section": (
        lambda lines: [*lines[:-1], '{"edges": {}}\n', lines[-1]],
        "unknown section 'edges'",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_import_file_is_one_line_and_writes_nothing(case, good_lines, tmp_path):
    content, message = CASES[case]
    path = tmp_path / "bad.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else "".join(content(good_lines)))
    store = tmp_path / "target.sqlite"
    r = htam("memory", "import", str(path), cwd=tmp_path, env={"HTAM_LOCAL_PATH": str(store)})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"error: {path}") and r.stderr.strip().count("\n") == 0, r.stderr
    assert message in r.stderr, r.stderr
    assert not store.exists()


def test_the_good_file_imports(good_lines, tmp_path):
    """The cases above are refused for what they changed, not for something else."""
    path = tmp_path / "good.jsonl"
    path.write_text("".join(good_lines))
    r = htam("memory", "import", str(path), cwd=tmp_path, env={"HTAM_LOCAL_PATH": str(tmp_path / "t.sqlite")})
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--alpha", "inf"], "--alpha: Input should be a finite number"),
        (["--lam", "inf"], "--lam: Input should be a finite number"),
        (["--beta", "inf"], "--beta: Input should be a finite number"),
        (["--tau", "nan"], "--tau: Input should be a finite number"),
        (["--K", "0"], "--K: Input should be greater than or equal to 1"),
    ],
)
def test_bad_scoring_parameters_are_one_line(flags, message, tmp_path):
    env = {"HTAM_LOCAL_PATH": str(tmp_path / "m.sqlite")}
    assert htam("memory", "seed", cwd=tmp_path, env=env).returncode == 0
    r = htam("memory", "score", *flags, cwd=tmp_path, env=env)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert message in r.stderr, r.stderr


@pytest.mark.parametrize("variable", ["HTAM_SCORING__ALPHA", "HTAM_SCORING__LAM", "HTAM_SCORING__BETA"])
def test_an_infinite_scoring_setting_is_one_line(variable, tmp_path):
    r = htam("memory", "score", cwd=tmp_path, env={"HTAM_LOCAL_PATH": str(tmp_path / "m.sqlite"), variable: "inf"})
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert f"error: {variable}: Input should be a finite number" in r.stderr


def test_a_missing_file_is_one_line(tmp_path):
    r = htam("memory", "import", str(tmp_path / "nope.jsonl"), cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "does not exist" in r.stderr and "memory import --help" in r.stderr


def test_version_2_exports_still_import(tmp_path, good_lines):
    """The previous format: one JSON object with a list per section."""
    sections: dict[str, list] = {}
    for line in good_lines[1:-1]:
        [(section, data)] = json.loads(line).items()
        sections.setdefault(section, []).append(data)
    old = tmp_path / "v2.json"
    old.write_text(json.dumps({"format": "htam-graph/memory", "version": 2, **sections}, indent=1))
    env = {"HTAM_LOCAL_PATH": str(tmp_path / "t.sqlite")}
    r = htam("memory", "import", str(old), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert htam("memory", "export", cwd=tmp_path, env=env).stdout == "".join(good_lines)


def test_an_import_path_with_markup_and_stored_markup_print_as_they_are(tmp_path, good_lines):
    """Names and paths are data: `[/bold]` is printed, never read as rich markup."""
    lines = with_record("locals", lambda loc: loc.update(name="[/bold]closing tag [red]x"))(good_lines)
    folder = tmp_path / "[b]odd [/b] [red]"  # a folder "[b]odd [" holding "b] [red]"
    folder.mkdir(parents=True)
    path = folder / "memory.jsonl"
    path.write_text("".join(lines))
    env = {"HTAM_LOCAL_PATH": str(tmp_path / "t.sqlite"), "COLUMNS": "400"}
    r = htam("memory", "import", str(path), cwd=tmp_path, env=env)
    assert r.returncode == 0 and str(path) in r.stdout, r.stderr
    local = record(good_lines, "locals")
    r = htam("memory", "show", "--locals", local["global_id"], cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "[/bold]closing tag [red]x" in r.stdout
