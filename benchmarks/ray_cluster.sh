# A two-node Ray cluster on 127.0.0.1 alone, for the tests and the bench. Run as
#   unshare --net --pid --fork --mount-proc bash ray_cluster.sh VENV_BIN TEMP_DIR [WRAPPER...]
# (benchmarks/ray_cluster.py does); the second node starts under WRAPPER when given (a command prefix, e.g.
# `python no_landlock.py` for a node without Landlock)
# so that it has a network namespace of its own (Ray's processes connect through the machine's own address
# otherwise) and a pid namespace whose end ends every process it started. Prints READY once both nodes run,
# then holds the namespaces until its standard input closes; commands join them with `nsenter --net`.
set -euo pipefail
bin=$1
temp=$2
shift 2
wrapper=("$@")
ip link set lo up
export RAY_USAGE_STATS_ENABLED=0
# No token: nothing but this namespace's loopback reaches the cluster, and a token the user keeps in ~/.ray
# must neither switch it on here nor be written there.
export RAY_AUTH_MODE=disabled
common=(--node-ip-address 127.0.0.1 --num-cpus 1 --disable-usage-stats)
"$bin/ray" start --head --port 6379 --include-dashboard=false --temp-dir "$temp" "${common[@]}" >"$temp.head.log" 2>&1
"${wrapper[@]}" "$bin/ray" start --address 127.0.0.1:6379 "${common[@]}" >"$temp.node.log" 2>&1
echo READY
read -r _ || true
# Inside this pid namespace `ray stop` sees only this cluster's processes.
"$bin/ray" stop --force >/dev/null 2>&1 || true
