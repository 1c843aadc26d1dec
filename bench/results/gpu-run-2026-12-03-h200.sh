#!/usr/bin/env bash
# H200 calls of 2026-12-02 (session 8): stages in $STAGES (gputests demo redteam runner ceiling scanbench kernelbench bench).
# The suite bench resumes from .gpu/bench2.tgz, the KernelBench run from .gpu/kb-resume.json, when present (carried back and forth).
# kernelbench: .kernelbench-full/ holds KernelBench's level 1-2 task files, .kernelbench/cands/ the catalog's candidates
# (bench/bench_catalog_coverage.py --write-candidates); neither is committed.
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
    demo) HOME=/tmp/demo-home timeout ${DEMO_S:-150} python3 -m htam_graph demo --record $OUT/demo-h200.json.gz --out /tmp/demo > $OUT/demo.log 2>&1; echo "demo rc=$?"; tail -25 $OUT/demo.log ;;
    gputests) timeout ${GPUTESTS_S:-200} python3 -m pytest -m gpu -q -p no:cacheprovider tests/runner/test_fused_gpu.py tests/runner/test_gpu_eval.py tests/runner/test_probes.py -k "not honest_suite" 2>&1 | tail -60 > $OUT/gputests.log; tail -25 $OUT/gputests.log ;;
    redteam) timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/runner/test_redteam_gpu.py 2>&1 | tail -40 > $OUT/redteam.log; tail -5 $OUT/redteam.log ;;
    runner) timeout $(( $(left) - 10 )) python3 bench/bench_runner.py --passes 2 ${PROFILE:+--profile} --out $OUT > $OUT/runner.log 2>&1; echo "runner rc=$?"; tail -3 $OUT/runner.log ;;
    ceiling) timeout ${CEIL_S:-300} python3 bench/bench_catalog_ceiling.py --tasks "$CEIL_TASKS" --rounds 1 --out $OUT > $OUT/ceiling.log 2>&1; echo "ceiling rc=$?"; grep -v "^\[" $OUT/ceiling.log | tail -30 ;;
    scanbench)
      timeout ${SCAN_S:-200} python3 bench/bench_catalog.py htam_graph/tasks/suite/level1/20_Cumsum.py htam_graph/tasks/suite/level1/21_Cumprod.py --seeds 2 --workers 3 --out /tmp/scan-bench > $OUT/scanbench.log 2>&1
      echo "scanbench rc=$?"; grep -v "^\[" $OUT/scanbench.log | tail -15
      rm -f /tmp/scan-bench/.lock; tar czf $OUT/scan-bench.tgz -C /tmp scan-bench ;;
    kernelbench)
      mkdir -p $OUT/kb
      timeout $(( $(left) - 10 )) python3 bench/bench_runner.py --passes 0 --kernelbench ${KB_ROOT:-.kernelbench-full} --candidates ${KB_CANDS:-.kernelbench/cands} ${KB_RESUME:+--resume .gpu/kb-resume.json} --out $OUT/kb > $OUT/kernelbench.log 2>&1
      echo "kernelbench rc=$?"; tail -30 $OUT/kernelbench.log ;;
    bench)
      # BENCH_NAME: the bench folder (and its resume archive .gpu/$BENCH_NAME.tgz); BENCH_ARGS: more bench options; extra env (HTAM_SCORING__TAU=...) reaches the bench
      B=${BENCH_NAME:-bench-suite}
      if [ -f .gpu/$B.tgz ]; then mkdir -p /tmp/b && tar xzf .gpu/$B.tgz -C /tmp/b; fi
      t=$(( $(left) - 20 )); [ -n "$BENCH_S" ] && [ "$BENCH_S" -lt "$t" ] && t=$BENCH_S
      timeout $t python3 bench/bench_catalog.py --seeds ${SEEDS:-2} ${METHODS:+--method $METHODS} --workers ${WORKERS:-3} --out /tmp/b/$B ${NOTE:+--note "$NOTE"} $BENCH_ARGS > $OUT/$B.log 2>&1
      echo "bench $B rc=$?"; grep -v "^\[" $OUT/$B.log | tail -15; grep -c "^\[" $OUT/$B.log
      rm -f /tmp/b/$B/.lock; tar czf $OUT/$B.tgz -C /tmp/b $B ;;
  esac
done
ls -la $OUT
