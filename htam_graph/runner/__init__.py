"""Build, load, verify and time candidate kernels (docs/native_format.md).

Entry points: `evaluate.Evaluator` and `evaluate.to_feedback` (judging), `native.load_cuda`
(used by candidates), `build.build_cubin` / `build.build_many` (nvcc with a cache).
Nothing is imported here, so importing a submodule stays cheap (torch loads lazily).
"""
