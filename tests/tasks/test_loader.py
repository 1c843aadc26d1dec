"""Task loading: the built-in suite, KernelBench layouts, malformed files, lookup by id or name."""

from __future__ import annotations

import hashlib
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from htam_graph.errors import TaskError
from htam_graph.tasks import builtin_suite_dir, exec_source, load_task, load_tasks, resolve_task, task_dtype

VALID = '''\
"""Doubles its input."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.rand(4, 4)]


def get_init_inputs():
    return []
'''

SUITE = load_tasks(builtin_suite_dir())
# Real CPU forwards only where the inputs are small: sizes are the task's own (meant for an H200).
CPU_INPUT_LIMIT = 64 * 2**20


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# ---------------------------------------------------------------- the built-in suite


def test_builtin_suite_has_at_least_24_tasks_sorted_by_level_then_number():
    assert len(SUITE) >= 24
    assert [(t.level, t.number) for t in SUITE] == sorted((t.level, t.number) for t in SUITE)
    assert {t.level for t in SUITE} == {1, 2}
    assert len({t.id for t in SUITE}) == len(SUITE)


def test_builtin_ids_names_and_hashes_follow_the_files():
    relu = next(t for t in SUITE if t.id == "level1/19_ReLU")
    assert (relu.name, relu.level, relu.number) == ("ReLU", 1, 19)
    assert relu.path == builtin_suite_dir() / "level1" / "19_ReLU.py"
    for task in SUITE:
        assert task.path == builtin_suite_dir() / f"{task.id}.py"
        assert task.sha256 == hashlib.sha256(task.path.read_bytes()).hexdigest()
        assert task.summary, f"{task.id} needs a one-line docstring"


@pytest.mark.parametrize("task", SUITE, ids=lambda t: t.id)
def test_builtin_task_builds_and_runs(task):
    module = task.load_module()
    init = module.get_init_inputs()
    assert isinstance(init, (list, tuple))
    with torch.device("meta"):  # shapes only: no memory, no compute
        inputs = module.get_inputs()
        out = module.Model(*init)(*inputs)
    assert isinstance(out, torch.Tensor)
    assert task_dtype(module) in (torch.float32, torch.float16, torch.bfloat16)
    if sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor)) > CPU_INPUT_LIMIT:
        return
    torch.manual_seed(0)
    model = module.Model(*init)
    with torch.no_grad():
        real = model(*module.get_inputs())
    assert real.shape == out.shape and real.dtype == out.dtype
    assert torch.isfinite(real).all()


def test_task_dtype_reads_the_first_floating_input():
    by_name = {t.name: t for t in SUITE}
    assert task_dtype(by_name["ReLU"].load_module()) == torch.float32
    assert task_dtype(by_name["LayerNorm_fp16"].load_module()) == torch.float16
    assert task_dtype(by_name["Add_RMSNorm_bf16"].load_module()) == torch.bfloat16
    # cross-entropy's second input is int64: the logits decide
    assert task_dtype(by_name["CrossEntropyLoss"].load_module()) == torch.float32


def test_task_dtype_without_a_floating_input_is_a_user_error(tmp_path):
    path = write(tmp_path / "ints.py", VALID.replace("torch.rand(4, 4)", "torch.arange(4)"))
    with pytest.raises(TaskError, match="no floating-point tensor") as err:
        task_dtype(load_task(path).load_module())
    assert err.value.path == str(path)


# ---------------------------------------------------------------- malformed files


def test_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path / "1_Broken.py", VALID.replace("def forward(self, x):", "def forward(self, x)"))
    with pytest.raises(TaskError) as err:
        load_task(path)
    assert (err.value.path, err.value.line) == (path, 10)
    assert f"{path}:10: syntax error" in str(err.value)


@pytest.mark.parametrize(
    ("cut", "missing"),
    [
        ("def get_inputs():\n    return [torch.rand(4, 4)]\n", "get_inputs"),
        ("def get_init_inputs():\n    return []\n", "get_init_inputs"),
    ],
)
def test_missing_function_names_file_and_piece(tmp_path, cut, missing):
    path = write(tmp_path / "2_Partial.py", VALID.replace(cut, ""))
    with pytest.raises(TaskError) as err:
        load_task(path)
    assert err.value.path == path
    message = str(err.value)
    assert str(path) in message and repr(missing) in message and f"def {missing}()" in message


def test_missing_model_names_file_and_piece(tmp_path):
    path = write(tmp_path / "3_NoModel.py", VALID.replace("class Model(", "class Network("))
    with pytest.raises(TaskError, match=r"3_NoModel\.py:1: 'Model' is not defined; add class Model") as err:
        load_task(path)
    assert (err.value.path, err.value.line) == (path, 1)


def test_model_without_forward_is_reported_at_its_line(tmp_path):
    path = write(tmp_path / "4_NoForward.py", VALID.replace("def forward(self, x):", "def run(self, x):"))
    with pytest.raises(TaskError, match=r"class Model has no forward method; define forward") as err:
        load_task(path)
    assert (err.value.path, err.value.line) == (path, 6)


def test_import_failure_names_the_file(tmp_path):
    path = write(tmp_path / "5_BadImport.py", "import no_such_module_htam\n" + VALID)
    task = load_task(path)
    with pytest.raises(TaskError, match=r"5_BadImport\.py: importing the task failed with ModuleNotFoundError") as err:
        task.load_module()
    assert (err.value.task, err.value.path) == (task.id, task.path)


def test_a_malformed_file_in_a_folder_fails_the_listing(tmp_path):
    write(tmp_path / "level1" / "1_Good.py", VALID)
    write(tmp_path / "level1" / "2_Bad.py", VALID.replace("def get_inputs", "def get_input"))
    with pytest.raises(TaskError, match="'get_inputs'") as err:
        load_tasks(tmp_path)
    assert err.value.path == tmp_path / "level1" / "2_Bad.py"


# ---------------------------------------------------------------- layouts and filters


def test_kernelbench_checkout_layout(tmp_path):
    repo = tmp_path / "KernelBench"
    write(repo / "scripts" / "run_and_check.py", "print('not a task')\n")
    write(repo / "KernelBench" / "level2" / "1_Conv.py", VALID)
    write(repo / "KernelBench" / "level1" / "10_Second.py", VALID)
    write(repo / "KernelBench" / "level1" / "2_First.py", VALID)
    tasks = load_tasks(repo)
    assert [t.id for t in tasks] == ["level1/2_First", "level1/10_Second", "level2/1_Conv"]
    assert [t.number for t in tasks] == [2, 10, 1]
    # the same ids whether the root is the checkout, its task folder or one level folder
    assert [t.id for t in load_tasks(repo / "KernelBench" / "level1")] == ["level1/2_First", "level1/10_Second"]


def test_flat_folder_and_lone_file(tmp_path):
    write(tmp_path / "mine" / "double.py", VALID)
    (task,) = load_tasks(tmp_path / "mine")
    assert (task.id, task.name, task.level, task.number) == ("double", "double", None, None)
    lone = load_task(write(tmp_path / "level3" / "7_Net.py", VALID))
    assert (lone.id, lone.name, lone.level, lone.number) == ("7_Net", "Net", 3, 7)
    assert load_tasks(lone.path)[0].id == "7_Net"


def test_pattern_filters_by_glob_or_substring():
    assert [t.id for t in load_tasks(builtin_suite_dir(), "level2/*Gemm*")] == [
        "level2/3_Gemm_Bias_ReLU",
        "level2/4_Gemm_GELU",
        "level2/5_Gemm_Scale_Residual",
    ]
    assert {t.id for t in load_tasks(builtin_suite_dir(), "softmax")} == {
        "level1/7_Softmax",
        "level1/8_LogSoftmax",
        "level2/8_Bmm_Scale_Softmax",
    }


def test_nothing_found_is_a_user_error(tmp_path):
    with pytest.raises(TaskError, match="no task files") as err:
        load_tasks(tmp_path)
    assert (err.value.path, err.value.task) == (tmp_path, None)
    with pytest.raises(TaskError, match="matching 'no-such-task'") as err:
        load_tasks(builtin_suite_dir(), "no-such-task")
    assert err.value.task == "no-such-task"
    with pytest.raises(TaskError, match="no such file or folder; give a task file or a KernelBench folder") as err:
        load_tasks(tmp_path / "missing")
    assert err.value.path == tmp_path / "missing"


# ---------------------------------------------------------------- lookup and import


def test_resolve_by_id_name_substring_and_path():
    assert resolve_task("level1/19_ReLU").id == "level1/19_ReLU"
    assert resolve_task("ReLU").id == "level1/19_ReLU"  # exact name beats the Gemm_Bias_ReLU substring
    assert resolve_task("relu").id == "level1/19_ReLU"
    assert resolve_task("Cumprod").id == "level1/21_Cumprod"
    assert resolve_task("Conv2d").id == "level2/6_Conv2d_Bias_ReLU"
    path = builtin_suite_dir() / "level1" / "11_GELU.py"
    assert resolve_task(str(path)).path == path


def test_resolve_ambiguous_lists_the_matches():
    with pytest.raises(TaskError) as err:
        resolve_task("matmul")
    assert err.value.task == "matmul" and "ambiguous" in str(err.value)
    assert "level1/1_Square_matmul" in str(err.value) and "level1/2_Batched_matmul" in str(err.value)


def test_resolve_unknown_suggests_close_matches():
    with pytest.raises(TaskError, match="did you mean.*Softmax") as err:
        resolve_task("Sofmax")
    assert err.value.task == "Sofmax"
    with pytest.raises(TaskError, match="no such task file") as err:
        resolve_task("missing_task.py")
    assert err.value.path == Path("missing_task.py").resolve()


def test_resolve_in_another_root(tmp_path):
    write(tmp_path / "level1" / "5_Double.py", VALID)
    assert resolve_task("Double", tmp_path).id == "level1/5_Double"
    with pytest.raises(TaskError, match=str(tmp_path)) as err:
        resolve_task("ReLU", tmp_path)
    assert err.value.task == "ReLU"


def test_load_module_gives_a_fresh_module_and_leaves_sys_modules_alone():
    task = resolve_task("ReLU")
    before = set(sys.modules)
    first, second = task.load_module(), task.load_module()
    assert first is not second and first.Model is not second.Model
    assert first.__name__ != second.__name__
    assert set(sys.modules) == before
    assert callable(first.get_inputs) and callable(first.get_init_inputs)


def test_source_runs_its_annotations_as_python_does():
    # The harness and the referee have `from __future__ import annotations`; the candidate
    # and task modules they run must not inherit it, or a patch written as a module-level
    # annotation would not run in the judge but would run for the user (the red team's
    # annotation_patch.py).
    kept = exec_source("hits = []\nmarker: hits.append(1)\n", "<annotation test>", "htam_annotation_test", keep=True)
    assert kept.hits == [1] and sys.modules.pop("htam_annotation_test") is kept
    passing = exec_source("hits = []\nmarker: hits.append(1)\n", "<annotation test 2>", "htam_annotation_test_2")
    assert passing.hits == [1] and "htam_annotation_test_2" not in sys.modules
