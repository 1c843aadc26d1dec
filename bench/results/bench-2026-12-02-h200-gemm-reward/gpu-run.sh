#!/usr/bin/env bash
# Session 9, call V: htam on the six GEMM-family tasks of the built-in suite, two seeds, with
# the reward's base at its default (best) and at fastest, one bench each, no torch.compile timing.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=/tmp/htam-cache COLUMNS=110 HOME=/tmp/home
mkdir -p /tmp/home /tmp/b
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys;print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  nvcc --version | tail -2; nproc; cat .gpu/commit.txt; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
T="level1/1_Square_matmul level1/2_Batched_matmul level2/3_Gemm_Bias_ReLU level2/4_Gemm_GELU level2/5_Gemm_Scale_Residual level2/8_Bmm_Scale_Softmax"
for v in fastest best; do
  echo "=== reward_from=$v at $(date +%T)"
  HTAM_SCORING__REWARD_FROM=$v timeout ${EXP_S:-150} python3 bench/bench_catalog.py $T --method htam --seeds 2 --workers 3 \
    --no-compile-reference --out /tmp/b/gemm-$v --note "GEMM-family tasks, htam, reward_from=$v" > $OUT/gemm-$v.log 2>&1
  echo "rc=$?"; grep -v "^\[" $OUT/gemm-$v.log | tail -9; grep -c "^\[" $OUT/gemm-$v.log
  rm -f /tmp/b/gemm-$v/.lock; tar czf $OUT/gemm-$v.tgz -C /tmp/b gemm-$v
done
