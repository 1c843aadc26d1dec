#!/usr/bin/env bash
# Neo4j for CI, where there is no Docker engine: bash docker/neo4j-ci.sh start|stop|status
# start builds the launcher (once), runs Neo4j 5.26 on $HTAM_NEO4J_URI (default
# bolt://127.0.0.1:7687) with $HTAM_NEO4J_PASSWORD (default htam-graph) in the background,
# waits up to 180 s for Bolt and prints the pid; on failure it prints why and exits 2.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${VENV:-$HOME/.cache/htam-graph/venv-dev}/bin/python"
export HTAM_NEO4J_URI="${HTAM_NEO4J_URI:-bolt://127.0.0.1:7687}"
export HTAM_NEO4J_PASSWORD="${HTAM_NEO4J_PASSWORD:-htam-graph}"

case "${1:-}" in
  start) args=(start --wait 180) ;;
  stop | status) args=("$@") ;;
  *) echo "usage: bash docker/neo4j-ci.sh start|stop|status" >&2; exit 2 ;;
esac
exec "$python" -m htam_graph db "${args[@]}"
