#!/usr/bin/env bash
# The sandbox on a GPU machine, in one command (under 8 minutes on the H200):
#   0. CUDA and CUDA IPC in a confined process (bench/scripts/sandbox_cuda_smoke.py);
#   1. the gpu-marked tests of the sandbox, the runner's GPU evaluation and the red team
#      (tests/runner/test_sandbox_gpu.py, test_builder.py, test_gpu_eval.py, test_redteam_gpu.py), sandboxed
#      as users run them;
#   2. the runner benchmark (bench/bench_runner.py, the suite's 29 honest candidates, 2
#      passes), sandboxed and then unconfined (--no-sandbox), and the ratio of their
#      evaluations per minute.
# Logs and JSON go to $OUT (default /tmp/sandbox-gpu-check). Wheels in .whl/ (pydantic and
# the rest, for a machine that lacks them) are installed into /tmp/site first.
#
#     bash bench/scripts/sandbox_gpu_check.sh
#
# SMOKE_ARGS (default --all; empty: the full policy only). STAGES="tests bench" picks stages; TESTS_S (default 200) and BENCH_S (135 per mode) bound
# them in seconds. All the GPU tests (the red team is 42 candidates twice) need more than
# 200 s: `STAGES=tests TESTS_S=560 bash bench/scripts/sandbox_gpu_check.sh` runs them all.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/sandbox-gpu-check}"
STAGES="${STAGES:-tests bench}"
mkdir -p "$OUT" /tmp/home /tmp/site
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "error: the wheels in .whl/ did not install" >&2; exit 2; }
fi
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=/tmp/htam-cache HOME=/tmp/home
{
  date -u
  git rev-parse HEAD 2>/dev/null || true
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"
  python3 -c "from htam_graph.runner import sandbox; print('landlock abi', sandbox.landlock_abi(), 'missing:', sandbox.missing())"
  uname -r
  # CUDA and CUDA IPC inside the sandbox (and, if that fails, which wall breaks them)
  timeout 300 python3 bench/scripts/sandbox_cuda_smoke.py ${SMOKE_ARGS---all}
} 2>&1 | tee "$OUT/env.txt"

if [[ " $STAGES " == *" tests "* ]]; then
  timeout "${TESTS_S:-200}" python3 -m pytest -p no:cacheprovider -q -m gpu --maxfail=3 \
    tests/runner/test_sandbox_gpu.py tests/runner/test_builder.py tests/runner/test_redteam_gpu.py \
    tests/runner/test_gpu_eval.py \
    2>&1 | tee "$OUT/gpu-tests.log" | tail -40
  echo "gpu tests: exit ${PIPESTATUS[0]}" | tee -a "$OUT/env.txt"
fi

if [[ " $STAGES " == *" bench "* ]]; then
  for mode in sandboxed unconfined; do
    flag="--no-sandbox"  # explicit: the default flips to on once this script passes
    [[ $mode == sandboxed ]] && flag="--sandbox"
    timeout "${BENCH_S:-135}" python3 bench/bench_runner.py --passes 2 $flag --out "$OUT/$mode" \
      >"$OUT/bench-$mode.log" 2>&1
    echo "bench $mode: exit $?" | tee -a "$OUT/env.txt"
  done
  python3 - "$OUT" <<'PY' | tee "$OUT/bench-ratio.txt"
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
keys = ("evals_per_minute_per_gpu", "evals_per_minute_per_gpu_last_pass")
rate = {}
for mode in ("sandboxed", "unconfined"):
    found = sorted((out / mode).glob("runner-*.json"))
    summary = json.loads(found[-1].read_text()).get("summary", {}) if found else {}
    rate[mode] = summary
    shown = ("candidates", "ok", *keys, "eval_s_median", "process_start_s_median", "cold_build_median_s")
    print(mode, {k: summary.get(k) for k in shown})
for key in keys:
    a, b = rate["sandboxed"].get(key), rate["unconfined"].get(key)
    if a and b:
        print(f"sandboxed / unconfined, {key}: {a / b:.3f}")
PY
  for mode in sandboxed unconfined; do
    cp "$(ls "$OUT/$mode"/runner-*.json 2>/dev/null | tail -1)" "$OUT/runner-$mode.json" 2>/dev/null || true
    rm -rf "${OUT:?}/$mode"
  done
fi
