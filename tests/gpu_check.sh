#!/bin/bash
# The checks to run on a machine with an NVIDIA GPU, in one go (about 4 minutes on 16 cores):
# the [cuda] half of the test suite on the GPU, random programs whose optimized build runs
# on the GPU against the plain CPU build (tests/fuzz, FLUXION_FUZZ_ARCH=cuda), and the GPU
# benchmark. Needs pytest-xdist and pytest-timeout; writes its logs under $OUT (default ./gpu-out).
# SECS: seconds for the test suite (the fuzz runs as long, NF processes beside it).
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$ROOT/src:$ROOT${PYTHONPATH:+:$PYTHONPATH}
export FLUXION_OFFLINE_CACHE_FILE_PATH=${FLUXION_OFFLINE_CACHE_FILE_PATH:-/tmp/fluxion-gpu-check}
SECS=${SECS:-240}
NF=${NF:-6}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
python3 -c "import llvmlite, numpy, sys; print(sys.version.split()[0], llvmlite.__version__, numpy.__version__)"
fz=$(mktemp -d)
for s in $(seq 1 "$NF"); do
  (cd /tmp && FLUXION_FUZZ_ARCH=cuda FLUXION_OFFLINE_CACHE_FILE_PATH=$fz/cache$s timeout $((SECS + 60)) \
     nice python3 -m tests.fuzz --count 100000 --oracle self --seed $((9000000 + s * 100000)) \
     --out "$fz/fz$s" --every 25 > "$fz/fz$s.log" 2>&1) &
done
FLUXION_TEST_ARCHS=cuda timeout "$SECS" python3 -m pytest tests -q -n 8 -p no:cacheprovider \
  --timeout 120 --ignore=tests/structure --ignore=tests/fuzz -rfE 2>&1 | tee "$OUT/pytest.log" | tail -40
timeout 100 python3 -m benchmarks.gpu --json "$OUT/gpu.json" 2>&1 | tee "$OUT/gpu.log" | tail -20
sleep 5; pkill -INT -f "tests.fuzz --count 100000"; sleep 3; pkill -f "tests.fuzz --count 100000"
for f in "$fz"/fz*.log; do grep "programs" "$f" | tail -n 1; done
tar czf "$OUT/fuzz.tgz" -C "$fz" .
