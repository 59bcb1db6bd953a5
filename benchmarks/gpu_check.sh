#!/usr/bin/env bash
# The CUDA check (issue 31), run on a lent GPU machine by the device tool: the `gpu` tests, the gates with their
# engines on CUDA, the runner bench on CUDA against the reference, and `dflash verify --first-kill` with every
# forked child initialising CUDA itself. Uses the machine's own python3 (torch with CUDA); the reference oracle
# travels as a wheel in .whl/. Every log lands in $OUT (or ./gpu-out when run by hand).
set -u
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
# The project is installed (as a user's would be), not only put on PYTHONPATH: verify's children drop the project
# root from sys.path so the gates import their private copy, and the embedded gates import `verify` itself.
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 DFLASH_REFERENCE_PATH=/tmp/ref
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site . >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --target /tmp/ref .whl/dflash-0.1.0-py3-none-any.whl >/dev/null 2>&1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; git log -1 --format='commit %h %s';
  python3 -c 'import torch,sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'; } > "$OUT/device.txt" 2>&1
# STEPS picks a subset for a rerun (default: all four).
STEPS="${STEPS:-collect gpu_tests devices gates_cuda bench verify_cuda}"
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS
  case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$OUT/steps.txt"; tail -4 "$OUT/$name.log"; }
step collect 60 bash -c 'python3 -m pip list 2>/dev/null | grep -i pytest; python3 -m pytest -p no:cacheprovider tests/gates -m gate --co -q | tail -5'
PYTEST=(python3 -m pytest -p no:cacheprovider -o addopts="--strict-markers" -q -rfE)
step gpu_tests 150 "${PYTEST[@]}" -m gpu tests/runner
# --device cuda (issue 27): forked children on their GPU under a warm torch parent, a CUDA-touching preload
# refused, one mutation of the embedded project killed with --device cuda --first-kill.
step devices 420 "${PYTEST[@]}" -m gpu tests/run/test_devices.py
DFLASH_DEVICE=cuda step gates_cuda 200 "${PYTEST[@]}" -m gate tests/gates --durations=5
step bench 200 python3 -c '
import json, os, torch
from benchmarks.bench import bench_runner
torch.set_num_threads(1)
figures = {"runner": bench_runner()}
open(os.environ["OUT"] + "/bench.json", "w").write(json.dumps(figures, indent=2) + "\n")
for k, v in figures["runner"].items(): print(f"  {k:34s} {v}")'
DFLASH_DEVICE=cuda step verify_cuda 300 python3 -m verify verify --first-kill --json "$OUT/verify.json"
cat "$OUT/steps.txt"
