// Runs roofline/chart_assets/model.js (and serving.js) under node for tests/test_model_js.py:
//   node tests/js/run_model.js MODEL_JS SERVING_JS INPUT_JSON
// INPUT_JSON holds {"data": page_data(), "settings": [...]}; prints a JSON list, one per setting,
// of RooflineModel's compute(settings) merged with RooflineServing's (as the page's
// window.rooflineCompute does). A setting with "serving": false skips the servers. A setting the
// port rejects gives {"error": message}.
"use strict";
const fs = require("fs");
const path = require("path");
const [modelJs, servingJs, input] = process.argv.slice(2);
const RooflineModel = require(path.resolve(modelJs));
const RooflineServing = require(path.resolve(servingJs));
const job = JSON.parse(fs.readFileSync(input, "utf8"));
const RM = RooflineModel.create(job.data);
const RS = RooflineServing.create(RM);
const out = job.settings.map((s) => {
  try {
    const r = RM.compute(s);
    return s.serving === false ? r : Object.assign(r, RS.compute(s));
  } catch (e) {
    return { error: e.message };
  }
});
process.stdout.write(JSON.stringify(out));
