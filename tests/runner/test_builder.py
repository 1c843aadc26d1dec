"""The sandbox's builder of load_inline candidates (runner/builder.py): it runs the
candidate's module confined, reports build errors, and the candidate's confined process
then loads what it built without starting a compiler."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from htam_graph.runner import sandbox
from htam_graph.runner.builder import InlineBuilder, use_prebuilt

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock and seccomp are Linux's"),
    pytest.mark.skipif(sandbox.missing() is not None, reason=f"no sandbox here: {sandbox.missing()}"),
]

# A load_inline candidate for the CPU: its static initializer attacks when the library loads.
INLINE = r'''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <string>
static std::string attack() {
    std::string got;
    if (open("/tmp/htam-builder-pwned", O_WRONLY | O_CREAT, 0644) >= 0) got += "write /tmp; ";
    if (kill(getppid(), 0) == 0) got += "signal the parent; ";
    pid_t child = fork();
    if (child == 0) _exit(0);
    if (child > 0) got += "fork; ";
    return got;
}
static const std::string got_at_load = attack();
std::string attacks_succeeded() { return got_at_load; }
torch::Tensor twice(torch::Tensor x) { return x * 2; }
"""
ext = load_inline(name="twice_ext", cpp_sources=cpp_source, functions=["twice", "attacks_succeeded"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.twice(x)
'''


def test_the_builder_is_confined_and_reports_build_errors(tmp_path: Path):
    builder = InlineBuilder(tmp_path / "builds")
    target = Path(tempfile.gettempdir()) / f"htam-builder-pwned-{os.getpid()}"
    built = builder.build(f"open({str(target)!r}, 'w').close()\n", "sm_90", timeout_s=120)
    assert built.errors == ""  # the module failed for want of a right, not a build
    assert not target.exists()
    failed = builder.build("raise RuntimeError(\"Error building extension 'x': boom\")\n", "sm_90", 120)
    assert "Error building extension 'x'" in failed.errors


@pytest.mark.gpu  # no GPU needed, but compiling torch's headers takes a minute on CI's two cores
def test_a_built_extension_loads_in_a_confined_process_without_a_compiler(tmp_path: Path):
    built = InlineBuilder(tmp_path / "builds").build(INLINE, "sm_90", timeout_s=600)
    assert built.errors == "", built.errors
    assert not Path("/tmp/htam-builder-pwned").exists()  # the builder's own load was confined too
    import torch

    from htam_graph.tasks import exec_source

    use_prebuilt()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a candidate's process: confined, then the module runs and loads the library
        try:
            os.close(read)
            sandbox.confine(sandbox.candidate_policy(Path(tempfile.mkdtemp()), (tmp_path / "builds",)))
            os.environ["TORCH_EXTENSIONS_DIR"] = str(built.extensions_dir)
            module = exec_source(INLINE, "<inline>", "htam_inline_test")
            out = module.ModelNew()(torch.ones(3))
            os.write(write, f"{module.ext.attacks_succeeded()}|{out.tolist()}".encode())
        except BaseException as exc:
            os.write(write, f"error|{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(0)
    os.close(write)
    report = os.read(read, 4096).decode()
    os.waitpid(pid, 0)
    assert report == "|[2.0, 2.0, 2.0]", report  # no attack got through, and it computed
    assert not Path("/tmp/htam-builder-pwned").exists()


def test_the_prebuilt_loader_is_put_in_when_torch_extensions_are_first_imported():
    """use_prebuilt costs a process nothing until a candidate imports torch's extension
    loader (native candidates never do); then load_inline loads what the builder built."""
    code = (
        "import sys, torch\n"
        "from htam_graph.runner.builder import use_prebuilt\n"
        "use_prebuilt(); use_prebuilt()\n"
        "print('torch.utils.cpp_extension' in sys.modules)\n"
        "from torch.utils.cpp_extension import load_inline\n"
        "import torch.utils.cpp_extension as ext\n"
        "print(getattr(ext._jit_compile, 'htam_prebuilt', False))\n"
        "try:\n"
        "    load_inline('htam_absent', cpp_sources='', functions=[], build_directory=sys.argv[1])\n"
        "except RuntimeError as e:\n"
        "    print(str(e).split(':')[0])\n"
        "use_prebuilt()\n"  # imported already: patched at once, and only once
        "print(getattr(ext._jit_compile, 'htam_prebuilt', False))\n"
    )
    folder = tempfile.mkdtemp()
    out = subprocess.run(
        [sys.executable, "-c", code, folder],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **sandbox.python_env()},
    )
    assert out.stdout.split("\n")[:4] == ["False", "True", "Error building extension 'htam_absent'", "True"], (
        out.stdout + out.stderr
    )
