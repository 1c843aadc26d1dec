# Shortcuts for developers; CI is `bash .ci/run` (README.md). Run with the venv active, or
# `make PYTHON=.venv/bin/python ...`; ARGS adds pytest options (`make test-fast ARGS="-x tests/llm"`).
PYTHON ?= python
ARGS ?=

# The inner loop: unit tests only, in about two minutes on two cores. Left out: tests of a
# real Neo4j, nvcc, a GPU or Chromium (their markers: the Browser test is neo4j-marked), the
# `slow` ones, the catalog's kernels compiled for the CPU simulator (g++, minutes), and the
# end-to-end tests that start `htam` processes by the dozen (whole benches among them), and
# the judge's two slowest tests (a full judging of a cheating matmul, a 64 M-element
# comparison: 15-20 s each here).
FAST_MARKERS = not neo4j and not nvcc and not gpu and not slow
FAST_IGNORE = \
	--ignore=tests/catalog/test_kernels_cpu.py \
	--ignore=tests/cli \
	--ignore=tests/test_readme_walk.py \
	--ignore=tests/tasks/test_tasks_cli.py \
	--ignore=tests/memory/test_import_crash.py \
	--deselect=tests/loop/test_table.py::test_a_train_test_comparison_runs_and_reports_paired_differences \
	--deselect=tests/loop/test_table.py::test_a_replay_bench_of_htam_and_its_controls_runs_on_the_cpu \
	--deselect=tests/loop/test_table.py::test_flat_learns_its_memory_in_a_train_test_comparison \
	--deselect=tests/runner/test_timed_inputs.py::test_every_timed_trial_sees_fresh_inputs_in_full \
	--deselect=tests/runner/test_compare.py::test_a_large_output_is_never_copied_whole

.PHONY: test-fast
test-fast:
	$(PYTHON) -m pytest -q -p no:cacheprovider -n 2 -m "$(FAST_MARKERS)" $(FAST_IGNORE) $(ARGS)
