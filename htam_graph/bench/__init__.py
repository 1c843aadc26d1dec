"""`htam bench`: every task of a suite with every method and seed, and a report.

Dependencies point one way: suite (which tasks) and plan (the grid, the bench manifest,
run ids, what is done) <- worker (one stream of runs through the loop) <- executor (a
process per GPU, each pulling streams) and results (run folders -> tables) <- metrics
(docs/method.md's metrics over the tables) <- report (Markdown and plots). The CLI
(`htam_graph/cli/bench.py`) is a thin layer over these; docs/bench.md describes the
output folder and the metrics.
"""
