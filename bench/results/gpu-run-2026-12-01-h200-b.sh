#!/usr/bin/env bash
# One H200 call: htam bench over 6 suite tasks x 4 methods with the strategy catalog as
# the LLM, judged on the GPU (the report is written on the dev machine: --report-only).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=/tmp/htam-cache COLUMNS=100 HOME=/tmp/home
mkdir -p /tmp/home
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys;print('python', sys.version.split()[0], 'torch', torch.__version__)"
  nvcc --version | tail -2; git log -1 --format=%H 2>/dev/null; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
timeout ${BENCH_S:-200} python3 -m htam_graph bench level1/4_Sum_reduction_dim level1/7_Softmax level1/10_RMSNorm \
  level1/15_CrossEntropyLoss level2/1_GELU_tanh_chain level2/2_Swish_Bias_Scale \
  --method htam,flat,feedback,vanilla --steps 4 --seeds 1 --llm catalog --evaluator gpu --no-compile-reference \
  --note "strategy catalog as the LLM, judged on one H200" --out /tmp/bench-h200 > $OUT/bench.log 2>&1
echo "bench rc=$?"; tail -20 $OUT/bench.log
tar czf $OUT/bench-h200.tgz -C /tmp bench-h200; ls -la $OUT
