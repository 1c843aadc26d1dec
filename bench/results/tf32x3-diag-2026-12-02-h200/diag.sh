python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=/tmp/htam-cache HOME=/tmp/home
mkdir -p /tmp/home
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; python3 -c "import torch;print(torch.__version__)"; nvcc --version | tail -1; cat .gpu/commit.txt; } | tee $OUT/env.txt
timeout 150 python3 .gpu/tf32diag.py level1/1_Square_matmul $OUT/diag-square.json 2>&1 | tail -12
timeout 100 python3 .gpu/tf32diag.py level2/3_Gemm_Bias_ReLU $OUT/diag-gemm-bias-relu.json 2>&1 | tail -12
N=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1); echo "ncu: $N"
if [ -n "$N" ]; then for skip in 36 144; do timeout 120 $N --kernel-name k0_gemm --launch-skip $skip --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis python3 .gpu/tf32diag.py level1/1_Square_matmul /tmp/x.json > $OUT/ncu-$skip.txt 2>&1; echo "ncu rc=$?"; grep -v "^==PROF==" $OUT/ncu-$skip.txt | grep -v "^ *$" | head -120; done; fi
