#!/usr/bin/env bash
# H200 calls of 2026-12-01 (session 2): stages in $STAGES (redteam runner bench report).
# The suite bench resumes from .gpu/bench-suite (carried back and forth as a tarball).
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=/tmp/htam-cache COLUMNS=110 HOME=/tmp/home
mkdir -p /tmp/home
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys;print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  nvcc --version | tail -2; nproc; cat .gpu/commit.txt; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
left() { echo $(( ${BUDGET_S:-570} - ($(date +%s) - T0) )); }
for stage in $STAGES; do
  echo "=== stage $stage at $(date +%T), $(left) s left"
  case $stage in
    redteam) timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/runner/test_redteam_gpu.py 2>&1 | tail -40 > $OUT/redteam.log; tail -5 $OUT/redteam.log ;;
    runner) timeout ${RUNNER_S:-240} python3 bench/bench_runner.py --passes 2 ${PROFILE:+--profile} --out $OUT > $OUT/runner.log 2>&1; tail -5 $OUT/runner.log ;;
    kb) mkdir -p $OUT/kb; timeout $(( $(left) - 15 )) python3 bench/bench_runner.py --passes 0 --kernelbench .kernelbench --out $OUT/kb > $OUT/kb/kb.log 2>&1; echo "kb rc=$?"; tail -30 $OUT/kb/kb.log ;;
    bench)
      if [ -f .gpu/bench-suite.tgz ]; then mkdir -p /tmp/b && tar xzf .gpu/bench-suite.tgz -C /tmp/b; fi
      timeout $(( $(left) - 20 )) python3 bench/bench_catalog.py --seeds ${SEEDS:-1} --workers ${WORKERS:-3} --out /tmp/b/bench-suite > $OUT/bench.log 2>&1
      echo "bench rc=$?"; grep -v "^\[" $OUT/bench.log | tail -15
      rm -f /tmp/b/bench-suite/.lock; tar czf $OUT/bench-suite.tgz -C /tmp/b bench-suite ;;
  esac
done
ls -la $OUT
