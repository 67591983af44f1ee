// The page's continuous server parts (roofline/chart_assets/serving.js) under node, for
// tests/test_model_js.py:   node tests/js/run_serving.js MODEL_JS SERVING_JS INPUT_JSON
// INPUT_JSON holds {"data": page_data(), "settings": [...]}; prints a JSON list, one per setting:
// - a setting with "streams": the scheduler alone (serveContinuous) on each given stream
//   {prompts, gens, slots, num_blocks, max_model_len} of the setting's scenario, its summary each;
// - otherwise the KV pool (kvPool) from the card's memory: {num_blocks, capacity_tokens}, or
//   {error, field} where it is refused.
"use strict";
const fs = require("fs");
const path = require("path");
const [modelJs, servingJs, input] = process.argv.slice(2);
const RooflineModel = require(path.resolve(modelJs));
const RooflineServing = require(path.resolve(servingJs));
const job = JSON.parse(fs.readFileSync(input, "utf8"));
const RM = RooflineModel.create(job.data);
const RS = RooflineServing.create(RM);
const B = job.data.server.block_size;
const out = job.settings.map((s) => {
  const m = RM.scenario(Object.assign({}, job.data.initial, s));
  if (s.streams) {
    return s.streams.map((x) => RS.serveContinuous(m, x.prompts, x.gens, x.slots,
      { num_blocks: x.num_blocks, block_size: B, capacity_tokens: x.num_blocks * B }, x.max_model_len).summary);
  }
  try {
    const pool = RS.kvPool(m, s.gpu_memory_utilization);
    return { num_blocks: pool.num_blocks, capacity_tokens: pool.capacity_tokens };
  } catch (e) {
    if (!e.field) throw e;
    return { error: e.message, field: e.field };
  }
});
process.stdout.write(JSON.stringify(out));
