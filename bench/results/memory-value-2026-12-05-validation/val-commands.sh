cd /work/wt-val
export PYTHONPATH=/work/wt-val
P=/root/.cache/htam-graph/venv-04cdf2f463d4b12c/bin/python
T=bench/results/table-2026-12-04-h200-suite/table.parquet
A="--table $T --train /work/wt-val/bench/tables/suite-train-inner.txt --test /work/wt-val/bench/tables/suite-validation.txt --seeds 20 --steps 3 --workers 1"
$P bench/bench_memory_value.py $A --tau 0.5 --methods htam,htam-no-hierarchy,flat --out /work/runs/val-t05 > /work/runs/val-t05.log 2>&1
$P bench/bench_memory_value.py $A --tau 0.1 --methods htam --out /work/runs/val-t01 > /work/runs/val-t01.log 2>&1
$P bench/bench_memory_value.py $A --tau 0.02 --methods htam --out /work/runs/val-t002 > /work/runs/val-t002.log 2>&1
echo done > /work/runs/val.done
