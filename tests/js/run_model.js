// Runs roofline/chart_assets/model.js under node for tests/test_model_js.py:
//   node tests/js/run_model.js MODEL_JS INPUT_JSON
// INPUT_JSON holds {"data": page_data(), "settings": [...]}; prints a JSON list of
// RooflineModel.create(data).compute(settings) results, one per setting.
"use strict";
const fs = require("fs");
const [modelJs, input] = process.argv.slice(2);
const RooflineModel = require(require("path").resolve(modelJs));
const job = JSON.parse(fs.readFileSync(input, "utf8"));
const RM = RooflineModel.create(job.data);
const out = job.settings.map((s) => RM.compute(s));
process.stdout.write(JSON.stringify(out));
