#!/usr/bin/env bash
# Device call 1 (nvidia-h200-x2): two single-GPU jobs side by side, each its own process tree.
#   GPU 0: attention and memory probes; the default grid (graph engine) of the three models a
#          calibration may be fitted on (issue 9); the hf-eager grid of the same models.
#   GPU 1: the GPU tests of the graph engine's new architectures; MoE/MLA/windowed models
#          (issue 11); held-out dense models at long contexts (issue 9).
# Everything lands in $OUT/results.tgz (refreshed every 40 s and at the end).
set -u
source calibrate/runs/common.sh
env_info > "$W/env.txt" 2>&1
snap_loop & SNAP=$!

(
  export CUDA_VISIBLE_DEVICES=0
  timeout 100 python3 -m calibrate.probes --out "$W/g0/probes" --what attention,memory --budget-s 85
  echo "== probes done at $(elapsed) s"
  timeout 240 python3 -m calibrate.gpu_job --out "$W/g0/grid" --card h200 --grid default --engines graph \
    --models qwen2.5-1.5b,qwen2.5-7b,llama-3.1-8b --budget-s 215
  echo "== graph grid done at $(elapsed) s"
  timeout 160 python3 -m calibrate.gpu_job --out "$W/g0/eager" --card h200 --engines hf-eager \
    --models qwen2.5-1.5b,qwen2.5-7b,llama-3.1-8b --prompts 128,2048,8192 --gen 32 --batches 1,4,16,64,256 \
    --no-ceilings --disable-cudnn-sdpa --budget-s 140
  echo "== hf-eager grid done at $(elapsed) s"
) > "$W/gpu0.log" 2>&1 &
G0=$!

(
  export CUDA_VISIBLE_DEVICES=1
  timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_graph_engine_models.py tests/test_calibrate_cpu.py -k "gpu or cuda" 2>&1 | tail -15
  echo "== GPU tests done at $(elapsed) s"
  timeout 300 python3 -m calibrate.gpu_job --out "$W/g1/moe" --card h200 --engines graph \
    --models qwen3-30b-a3b,gpt-oss-20b,deepseek-v2-lite,mixtral-8x7b --prompts 128,2048 --gen 32 \
    --batches 1,2,4,8,16,32,64,128,256,512 --no-ceilings --budget-s 280
  echo "== MoE done at $(elapsed) s"
  timeout 120 python3 -m calibrate.gpu_job --out "$W/g1/heldout" --card h200 --engines graph \
    --models qwen2.5-3b,qwen2.5-0.5b,mistral-7b-v0.3,qwen2.5-14b --prompts 512,4096,16384 --gen 32 \
    --batches 1,4,16,64,256,1024 --no-ceilings --budget-s 105
  echo "== held-out done at $(elapsed) s"
) > "$W/gpu1.log" 2>&1 &
G1=$!

wait $G0 $G1
kill $SNAP 2>/dev/null
snap
echo "== total $(elapsed) s"; ls -la "$OUT"
for f in "$W/gpu0.log" "$W/gpu1.log"; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|passed|failed" "$f" | tail -25; done
