#!/usr/bin/env bash
# One H200 call of `htam catalog record` (device tool): installs the carried wheels (.whl), continues the
# recording in .gpu/$NAME.tgz when present, records for RECORD_S seconds, and returns the table folder as
# $OUT/$NAME.tgz with env.txt (date, GPU, versions, commit). Usage: NAME=suite SUITE=bench/tables/suite-order.txt
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=/tmp/htam-cache HOME=/tmp/home
mkdir -p /tmp/home /tmp/t
NAME=${NAME:-suite}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys;print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  nvcc --version | tail -2; nproc; cat .gpu/commit.txt 2>/dev/null || git rev-parse HEAD; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
[ -f .gpu/$NAME.tgz ] && tar xzf .gpu/$NAME.tgz -C /tmp/t
timeout ${RECORD_S:-480} python3 -m htam_graph catalog record ${SUITE:-bench/tables/suite-order.txt} --out /tmp/t/$NAME \
  --no-compile-reference $RECORD_ARGS > $OUT/record-$NAME.log 2>&1
echo "record rc=$? after $(( $(date +%s) - T0 )) s"; tail -40 $OUT/record-$NAME.log
tar czf $OUT/$NAME.tgz -C /tmp/t $NAME
