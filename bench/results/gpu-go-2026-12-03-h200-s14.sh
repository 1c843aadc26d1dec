# Session 14 GPU call: on the committed tree (the working tree may hold unfinished edits of a helper)
set -o pipefail
# the working tree's unfinished edits are undone from .gpu/wip.patch (git diff HEAD) and .gpu/wip-new.txt (untracked files)
if [ -s .gpu/wip.patch ]; then patch -s -R -p1 < .gpu/wip.patch || { echo "wip.patch does not reverse: the tree changed"; exit 1; }; fi
[ -s .gpu/wip-new.txt ] && xargs rm -f < .gpu/wip-new.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD HTAM_CACHE_DIR=/tmp/htam-cache HOME=/tmp/home PYTHONUNBUFFERED=1
mkdir -p /tmp/home
for s in $SWEEPS; do
  cp .gpu/rowsweep.py $OUT/rowsweep.py.txt
  SWEEP=$s timeout ${SWEEP_S:-150} python3 .gpu/rowsweep.py 2>&1 | grep -v "^\[" | tail -30
  mv $OUT/rowsweep.json $OUT/$s-sweep.json
done
[ -n "$STAGES" ] && bash .gpu/run.sh > $OUT/run.log 2>&1
tail -30 $OUT/run.log 2>/dev/null
