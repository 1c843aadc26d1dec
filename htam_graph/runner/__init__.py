"""Build, load, verify and time candidate kernels (docs/native_format.md, docs/judge.md).

Entry points: `evaluate.Evaluator` (judging on this machine's GPUs) and `evaluate.precheck`
(static checks and the build, without a GPU), `models.Feedback.of` (what an LLM sees),
`native.load_cuda` (used by candidates), `build.build_cubin` / `build.build_many` (nvcc
with a cache). The judge's processes: `referee/` (reference, inputs, comparisons, verdict;
never imports candidate code), `harness/` (a candidate's own process), `forkserver.py`.
Nothing is imported here, so importing a submodule stays cheap (torch loads lazily).
"""
