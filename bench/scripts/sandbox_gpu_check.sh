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
# SMOKE_ARGS (default --all; empty: the full policy only). STAGES="tests bench" picks stages.
# MODES: the bench runs' order (default "sandboxed unconfined"; ABBA, so that neither mode always
# runs first: "unconfined sandboxed sandboxed unconfined"). TESTS_S (default 200) and BENCH_S (135
# per run) bound them in seconds. All the GPU tests (the red team is 42 candidates twice) need more than
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
  # MODES: the order of the runs; a mode may repeat (e.g. "unconfined sandboxed sandboxed unconfined",
  # ABBA, so that neither mode always runs on colder caches). Each run writes $OUT/<mode>-<i>/.
  i=0
  for mode in ${MODES:-sandboxed unconfined}; do
    i=$((i + 1))
    flag="--no-sandbox"  # explicit: the default flips to on once this script passes
    [[ $mode == sandboxed ]] && flag="--sandbox"
    timeout "${BENCH_S:-135}" python3 bench/bench_runner.py --passes 2 $flag --out "$OUT/$mode-$i" \
      >"$OUT/bench-$mode-$i.log" 2>&1
    echo "bench $mode (run $i): exit $?" | tee -a "$OUT/env.txt"
  done
  python3 - "$OUT" <<'PY' | tee "$OUT/bench-ratio.txt"
import json, statistics, sys
from pathlib import Path

out = Path(sys.argv[1])
keys = ("evals_per_minute_per_gpu", "evals_per_minute_per_gpu_last_pass")
shown = ("candidates", "ok", *keys, "eval_s_median", "process_start_s_median", "cold_build_median_s")
rate: dict[str, list[dict]] = {"sandboxed": [], "unconfined": []}
runs = [d for d in out.glob("*-[0-9]*") if d.is_dir()]  # not the bench-<mode>-<i>.log files
for run in sorted(runs, key=lambda d: int(d.name.rsplit("-", 1)[1])):
    mode = run.name.rsplit("-", 1)[0]
    found = sorted(run.glob("runner-*.json"))
    summary = json.loads(found[-1].read_text()).get("summary", {}) if found else {}
    rate.setdefault(mode, []).append(summary)
    print(run.name, {k: summary.get(k) for k in shown})
for key in keys:
    a = [s[key] for s in rate["sandboxed"] if s.get(key)]
    b = [s[key] for s in rate["unconfined"] if s.get(key)]
    if a and b:
        print(f"sandboxed / unconfined, {key} (mean of {len(a)} and {len(b)} runs): "
              f"{statistics.mean(a) / statistics.mean(b):.3f}")
PY
  for run in "$OUT"/sandboxed-[0-9]* "$OUT"/unconfined-[0-9]*; do
    [[ -d $run ]] || continue
    cp "$(ls "$run"/runner-*.json 2>/dev/null | tail -1)" "$OUT/runner-$(basename "$run").json" 2>/dev/null || true
    rm -rf "${run:?}"
  done
fi
