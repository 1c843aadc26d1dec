#!/usr/bin/env bash
# Call X (session 10): pooling v3 (unrolled taps with unconditional loads; grid-stride tried last). Ceiling on the suite's two pooling tasks,
# level-1 pooling tasks (not committed) with the old and the new template's tuned kernel, then the suite bench on the
# two pooling tasks (3 methods, 2 seeds).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=/tmp/htam-cache COLUMNS=110 HOME=/tmp/home
mkdir -p /tmp/home
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys;print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  nvcc --version | tail -2; nproc; cat .gpu/commit.txt; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
echo "=== ceiling $(date +%T)"
timeout 200 python3 bench/bench_catalog_ceiling.py --tasks level1/13_MaxPool2d,level1/14_AvgPool2d --rounds 1 --out $OUT/ceiling > $OUT/ceiling.log 2>&1; echo "ceiling rc=$?"; grep -v "^\[" $OUT/ceiling.log | tail -12
for v in v3; do
  echo "=== kb $v $(date +%T)"
  mkdir -p $OUT/kb-$v
  timeout 200 python3 bench/bench_runner.py --passes 0 --kernelbench .kernelbench/pool --candidates .kernelbench/pool-$v --out $OUT/kb-$v > $OUT/kb-$v.log 2>&1; echo "kb $v rc=$?"; tail -12 $OUT/kb-$v.log
done
echo "=== bench $(date +%T)"
timeout 200 python3 bench/bench_catalog.py level1/13_MaxPool2d level1/14_AvgPool2d --seeds 2 --method htam,feedback,htam-no-prefix --workers 3 --out /tmp/bench-pool --note "pooling v3, 3 methods, 2 seeds, commit $(cut -c1-7 .gpu/commit.txt)" > $OUT/bench-pool.log 2>&1
echo "bench rc=$?"; grep -v "^\[" $OUT/bench-pool.log | tail -12
rm -f /tmp/bench-pool/.lock; tar czf $OUT/bench-pool.tgz -C /tmp bench-pool
ls -la $OUT
