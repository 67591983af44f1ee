#!/usr/bin/env bash
# Device call 5 (nvidia-h200, one GPU): the serving loop with prefill passes as CUDA-graph replays
# (calibrate/serving_loop.py, prefill_graphs). Call 4 showed the eager prefill bound by the host's
# kernel launches, 1.0-1.6x slower from run to run on one machine; these runs replace calls 2 and 4
# as the loop's record: the two runs the loop's terms are read from (mixed@40 seed 1 on the 1.5B,
# mixed@25 seed 1 on the 7B, as before) and every other stream held out.
set -u
source calibrate/runs/common.sh
W5="$W/call5"; mkdir -p "$W5"
env_info > "$W5/env.txt" 2>&1
SERVE="--card h200 --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
timeout 230 python3 -m calibrate.serving_job --out "$W5/serve" $SERVE --model qwen2.5-1.5b \
  --runs mixed@40:400:1,mixed@10:300:1,long-gen@15:300:2,mixed@80:400:1,mixed@0:400:1,short@60:400:3,mixed@20:300:5,long-gen@12:300:6,short@30:300:7,mixed@60:300:8 \
  --budget-s 210 > "$W5/serve15.log" 2>&1
echo "== 1.5b serving done at $(elapsed) s"; snap
timeout 190 python3 -m calibrate.serving_job --out "$W5/serve" $SERVE --model qwen2.5-7b \
  --runs mixed@25:300:1,long-gen@6:200:2,mixed@0:300:1,mixed@15:200:9,long-gen@8:200:10 \
  --budget-s 170 > "$W5/serve7.log" 2>&1
echo "== 7b serving done at $(elapsed) s"; snap
python3 -c "import json,glob; [print(f.split('/')[-1], json.load(open(f))['config'].get('prefill_graphs'), json.load(open(f))['config'].get('prefill_graph_note')) for f in sorted(glob.glob('$W5/serve/run-*.json'))]"
echo "== total $(elapsed) s"
for f in "$W5"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|served in" "$f" | tail -12; done
