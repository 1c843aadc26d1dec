#!/usr/bin/env bash
# The lead's final H200 session: the judge on the final code (red team, honest suite and
# runner benchmark), a scripted optimization run, and the demo's replay recording.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=/tmp/htam-cache COLUMNS=100
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys;print('python', sys.version.split()[0], 'torch', torch.__version__)"
  nvcc --version | tail -2; } > $OUT/env.txt 2>&1
stage() { echo "=== $1 $(date +%T)"; }
for s in $STAGES; do
  case $s in
    redteam) stage redteam; timeout ${RED_S:-150} python3 -m pytest -m gpu -q -p no:cacheprovider tests/runner/test_redteam_gpu.py 2>&1 | tail -40 > $OUT/redteam.log; tail -3 $OUT/redteam.log ;;
    runner) stage runner; timeout ${RUNNER_S:-170} python3 bench/bench_runner.py --passes 2 --out $OUT > $OUT/runner.log 2>&1; tail -25 $OUT/runner.log ;;
    gelu) stage gelu
      export HTAM_STORE=local HTAM_LOCAL_PATH=/tmp/gelu.sqlite
      python3 -m htam_graph memory seed > $OUT/gelu.log 2>&1
      timeout 120 python3 -m htam_graph optimize level2/1_GELU_tanh_chain --llm script --script bench/scripts/gelu_chain/script.yaml --steps 6 --run-id gelu-h200 --out /tmp/runs --evaluator gpu --json 2>>$OUT/gelu.log > $OUT/gelu-summary.json
      python3 -m htam_graph memory show >> $OUT/gelu.log 2>&1
      python3 -m htam_graph memory export -o /tmp/runs/gelu-memory.json
      tar czf $OUT/gelu-run.tgz -C /tmp/runs gelu-h200 gelu-memory.json; tail -12 $OUT/gelu.log
      unset HTAM_STORE HTAM_LOCAL_PATH ;;
    demo) stage demo
      HOME=/tmp/demo-home timeout ${DEMO_S:-150} python3 -m htam_graph demo --record $OUT/demo-h200.json.gz --out /tmp/demo > $OUT/demo.log 2>&1; echo "demo rc=$?"; tail -30 $OUT/demo.log ;;
  esac
done
cd $OUT && tar czf logs.tgz --remove-files *.log *.txt $(ls *.json 2>/dev/null); ls -la $OUT
