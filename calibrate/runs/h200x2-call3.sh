#!/usr/bin/env bash
# Device call 3 (nvidia-h200-x2), after calls 1-2 showed two harness artefacts (cuBLAS workspaces
# piling up over pooled side streams; cold prefills timed between 16k and 64k tokens): the same
# measurements again with the fixed harness, then TP2 again.
#   phase A, GPU 0: default grid (graph) of the three fit models, then the hf-eager grid;
#            GPU 1: held-out dense models (mistral-7b-v0.1: a 4,096-token window), then MoE/MLA models.
#   phase B, both GPUs: TP2 sweeps and the collectives probe.
set -u
source calibrate/runs/common.sh
W3="$W/call3"; mkdir -p "$W3"
env_info > "$W3/env.txt" 2>&1
snap_loop & SNAP=$!
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 205 python3 -m calibrate.gpu_job --out "$W3/grid" --card h200 --grid default --engines graph \
    --models qwen2.5-1.5b,qwen2.5-7b,llama-3.1-8b --budget-s 185
  echo "== graph grid done at $(elapsed) s"
  timeout 95 python3 -m calibrate.gpu_job --out "$W3/eager" --card h200 --engines hf-eager \
    --models qwen2.5-1.5b,qwen2.5-7b,llama-3.1-8b --prompts 128,2048,8192 --gen 32 --batches 1,4,16,64,256 \
    --no-ceilings --disable-cudnn-sdpa --budget-s 80
  echo "== hf-eager grid done at $(elapsed) s"
) > "$W3/gpu0.log" 2>&1 &
G0=$!
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 110 python3 -m calibrate.gpu_job --out "$W3/heldout" --card h200 --engines graph \
    --models qwen2.5-3b,qwen2.5-0.5b,mistral-7b-v0.3,qwen2.5-14b,mistral-7b-v0.1 --prompts 512,4096,16384 --gen 32 \
    --batches 1,4,16,64,256,1024 --budget-s 95
  echo "== held-out done at $(elapsed) s"
  timeout 170 python3 -m calibrate.gpu_job --out "$W3/moe" --card h200 --engines graph \
    --models qwen3-30b-a3b,gpt-oss-20b,deepseek-v2-lite,mixtral-8x7b --prompts 128,2048 --gen 32 \
    --batches 1,2,4,8,16,32,64,128,256,512 --no-ceilings --budget-s 150
  echo "== MoE done at $(elapsed) s"
) > "$W3/gpu1.log" 2>&1 &
G1=$!
wait $G0 $G1
echo "== phase A done at $(elapsed) s"
snap
timeout 270 python3 -m calibrate.tp_job --tp 2 --out "$W3/tp" --card h200 --probe \
  --models llama-3.1-8b,llama-3.1-70b,qwen2.5-32b,qwen2.5-14b --prompts 128,2048 \
  --batches 1,2,4,8,16,32,64,128,256,512,1024 --gen 32 --no-warm-prefill --budget-s 235 --timeout-s 262 \
  > "$W3/tp.log" 2>&1
echo "== TP done at $(elapsed) s"
kill $SNAP 2>/dev/null
snap
echo "== total $(elapsed) s"
for f in "$W3/gpu0.log" "$W3/gpu1.log" "$W3/tp.log"; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY" "$f" | tail -14; done
