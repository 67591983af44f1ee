# Sourced by the device-call scripts in this folder (run from the repository root on the GPU
# machine): environment, pydantic from the carried wheels, snapshots of the results into $OUT.
export PYTHONUNBUFFERED=1
# the device docs: NVLink multicast stays off in every process
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c "import pydantic" 2>/dev/null || {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
}
W=${W:-/tmp/w}
mkdir -p "$W"
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
# everything under $W into one archive in $OUT (the device returns at most 8 files), atomically
snap() { tar czf "$OUT/results.tgz.tmp" -C "$W" . 2>/dev/null && mv "$OUT/results.tgz.tmp" "$OUT/results.tgz"; }
snap_loop() { while true; do sleep 40; snap; done; }
env_info() {
  date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.mem,power.limit,mig.mode.current --format=csv
  python3 -c "import torch, transformers, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'numpy', numpy.__version__, 'gpus', torch.cuda.device_count())"
  nproc
}
# one serving job into DIR/serve, its log DIR/LOG.log, then a snapshot: serve_into DIR LOG ARGS...
# (SERVE_PREFIX, empty unless set, goes before the job's python3: `taskset -c 3` pins it to a core)
serve_into() {
  local dir=$1 log=$2; shift 2
  timeout 150 ${SERVE_PREFIX:-} python3 -m calibrate.serving_job --out "$dir/serve" --card "${CARD:-h200}" "$@" --budget-s 130 > "$dir/$log.log" 2>&1
  echo "== $log done at $(elapsed) s"; snap
}
# a command with the 5 ms power sampler running through it: sample_through DIR NAME COMMAND... (the
# samples into DIR/power-NAME.csv.gz, at most SAMPLER_MAX_S seconds of them, 400 unless set)
sample_through() {
  local dir=$1 name=$2; shift 2
  python3 calibrate/runs/power_sampler.py --out "$dir/power-$name.csv" --max-s "${SAMPLER_MAX_S:-400}" \
    > "$dir/sampler-$name.log" 2>&1 &
  local smp=$!
  sleep 1
  "$@"
  sleep 1; kill -TERM $smp 2>/dev/null; wait $smp 2>/dev/null
  gzip -f "$dir/power-$name.csv"
  echo "== $name sampled at $(elapsed) s"; snap
}
# the card this machine has, as the profiles name it (a call that asks for an H200 may be lent an
# H100): detect_card prints h200 or h100-sxm (and refuses anything else)
detect_card() {
  local name; name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  case "$name" in
    *H200*) echo h200 ;;
    *H100*) echo h100-sxm ;;
    *) echo "unknown card: $name" >&2; return 1 ;;
  esac
}
# on an H200 the first argument, on any other card the second (a call's rates per card: rate H200 H100)
rate() { if [ "$CARD" = h200 ]; then echo "$1"; else echo "$2"; fi; }
# a serving job only while a whole one (serve_into: 150 s at most) still fits a 600 s call: fits NAME
fits() { [ "$(elapsed)" -lt 430 ] || { echo "== $1 skipped at $(elapsed) s"; return 1; }; }
