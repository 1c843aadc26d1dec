#!/usr/bin/env bash
# One H200 call (device tool): (0) the sandbox smoke, every wall alone/left out/pairs (bounded by SMOKE_S);
# (1) the GPU confirmation of the replayed memory-value comparison (issue 30 item 7): on the suite's test
# tasks, htam starting from the memories it learnt on the training tasks in replay (.gpu/mem/htam-s<seed>.json,
# made by `htam bench bench/tables/suite-train.txt --method htam --seeds 3 --evaluator replay ...`) and the best
# control (feedback, fresh), 3 seeds, T = 6, catalog-space-v1, reward_from = parent, the real GPU judge.
# Each bench is bounded (BENCH_S); $OUT gets env.txt, smoke.txt and each bench folder's results. Knobs: METHODS (default
# "htam feedback"), STEPS (6), SMOKE_S (120; 0 skips the smoke), BENCH_S (200), WORKERS (3).
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=/tmp/htam-cache HOME=/tmp/home HTAM_SCORING__REWARD_FROM=parent
mkdir -p /tmp/home
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys;print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  nvcc --version | tail -2; nproc; uname -r; cat .gpu/commit.txt; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
if [ "${SMOKE_S:-120}" != 0 ]; then
  timeout ${SMOKE_S:-120} python3 bench/scripts/sandbox_cuda_smoke.py --all > $OUT/smoke.txt 2>&1
  echo "smoke rc=$? after $(( $(date +%s) - T0 )) s"; cat $OUT/smoke.txt
fi
common="--llm catalog --model catalog-space-v1 --evaluator gpu --seeds 3 --steps ${STEPS:-6} --workers ${WORKERS:-3} --no-compile-reference"
for m in ${METHODS:-htam feedback}; do
  memory=""; [ $m = htam ] && memory="--memory-from .gpu/mem"
  timeout ${BENCH_S:-200} python3 -m htam_graph bench bench/tables/suite-test.txt --method $m $memory \
    $common --out /tmp/confirm-$m > $OUT/$m.log 2>&1
  echo "$m bench rc=$? after $(( $(date +%s) - T0 )) s"
  tar czf $OUT/confirm-$m.tgz --exclude='*.sqlite' --exclude='*/builds/*' -C /tmp confirm-$m
  tail -5 $OUT/$m.log
done
