# Confirmation runs (PROTOCOL.md), 2026-12-06 01:25-01:47 UTC, from a detached worktree of 997460d on the 2-core CPU machine.
# An earlier run of the same commands (2026-12-05) was lost with its machine before its files were kept; see README.md.
cd /work/wt-val
export PYTHONPATH=/work/wt-val
P=/root/.cache/htam-graph/venv-04cdf2f463d4b12c/bin/python
T=bench/results/table-2026-12-04-h200-suite/table.parquet
for S in 3 6; do
  b=$(date +%s)
  $P bench/bench_memory_value.py --table $T --seeds 50 --steps $S --tau 0.5 --methods htam,htam-no-hierarchy,flat --workers 2 --out /work/runs/conf-t$S > /work/runs/conf-t$S.log 2>&1
  echo "T=$S rc=$? secs=$(( $(date +%s) - b )) $(date -u)" >> /work/runs/conf.done
done
