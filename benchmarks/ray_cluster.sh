# A two-node Ray cluster on 127.0.0.1 alone, for the tests and the bench. Run as
#   unshare --net --pid --fork --mount-proc bash ray_cluster.sh VENV_BIN TEMP_DIR  (benchmarks/ray_cluster.py does)
# so that it has a network namespace of its own (Ray's processes connect through the machine's own address
# otherwise) and a pid namespace whose end ends every process it started. Prints READY once both nodes run,
# then holds the namespaces until its standard input closes; commands join them with `nsenter --net`.
set -euo pipefail
bin=$1
temp=$2
ip link set lo up
export RAY_USAGE_STATS_ENABLED=0
common=(--node-ip-address 127.0.0.1 --num-cpus 1 --disable-usage-stats)
"$bin/ray" start --head --port 6379 --include-dashboard=false --temp-dir "$temp" "${common[@]}" >"$temp.head.log" 2>&1
"$bin/ray" start --address 127.0.0.1:6379 "${common[@]}" >"$temp.node.log" 2>&1
echo READY
read -r _ || true
# Inside this pid namespace `ray stop` sees only this cluster's processes.
"$bin/ray" stop --force >/dev/null 2>&1 || true
