#!/usr/bin/env bash
# One device session: install the carried wheels, then the stages named in $STAGES.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=/tmp/htam-cache
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem --format=csv | tee $OUT/nvidia-smi.csv
python3 -c "import torch; p = torch.cuda.get_device_properties(0); print(torch.__version__, p.name, p.multi_processor_count, p.clock_rate, p.memory_clock_rate, p.memory_bus_width)" | tee -a $OUT/nvidia-smi.csv
for stage in $STAGES; do
  echo "=== stage $stage $(date +%T)"
  case $stage in
    smoke) timeout 150 python3 -m htam_graph eval level1/19_ReLU bench/candidates/level1/19_ReLU.py --trials 20 --json 2>&1 | tee $OUT/smoke.log || exit 1 ;;
    gpu) timeout ${GPU_S:-300} python3 -m pytest -m gpu -q -p no:cacheprovider tests/runner/test_gpu_eval.py -k "${GPU_K:-not zzz}" --junitxml=$OUT/gpu.xml 2>&1 | tee $OUT/gpu.log ;;
    redteam) timeout ${RED_S:-300} python3 -m pytest -m gpu -q -p no:cacheprovider tests/runner/test_redteam_gpu.py --junitxml=$OUT/redteam.xml 2>&1 | tee $OUT/redteam.log ;;
    diag) timeout 300 python3 .kernelbench/diag.py ${DIAG_TRIALS:-100} 2>&1 | tee $OUT/diag.log ;;
    bench) timeout ${BENCH_S:-300} python3 bench/bench_runner.py --passes ${PASSES:-3} --out $OUT ${BENCH_ARGS} 2>&1 | tee $OUT/bench.log ;;
  esac
  echo "=== stage $stage done rc=$? $(date +%T)"
done
