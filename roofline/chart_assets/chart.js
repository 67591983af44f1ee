/* The page: controls, six panels drawn with plotly.js from RooflineModel (model.js) and
 * RooflineServing (serving.js), a self-test.
 * window.rooflineCompute(settings) returns the numbers behind the charts (for the parity test);
 * ?selftest=1 runs window.rooflineSelfTest() after the first draw and writes its JSON into
 * <pre id="selftest">.
 * Names read from files (cards, models, calibrations) are data, never markup: the page writes
 * them with textContent, and into plotly's text (which reads a few tags) only through esc(). */
"use strict";

(function () {
  var DATA = JSON.parse(document.getElementById("roofline-data").textContent);
  var RM = RooflineModel.create(DATA);
  var RS = RooflineServing.create(RM);
  var GiB = DATA.gib;
  var MAX_BATCH = DATA.bend_max_batch;
  var PLOTS = ["plot-throughput", "plot-roofline", "plot-ttft", "plot-memory", "plot-slots", "plot-serving"];
  var COLORS = { thr: "#1f5fbf", tpot: "#e0701a", meas: "#111111", roof: "#444444", cal: "#8a3ffc",
                 ttft: "#0f8a6a", weights: "#5b7db8", kv: "#e0a21a", act: "#c4504a", logits: "#8a6fb0",
                 work: "#9aa0a6", used: "#2a8a4a", idle: "#d9534f", statik: "#d9534f", cont: "#1f5fbf" };
  var REGION_FILL = ["rgba(46,160,67,0.10)", "rgba(240,180,40,0.16)", "rgba(214,80,70,0.10)"];
  // responsive: false -- plotly's own resize handler costs every redraw; the page resizes plots itself
  var CONFIG = { displaylogo: false, responsive: false };
  var FONT = { family: "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size: 12 };

  var state = Object.assign({}, DATA.initial);

  // ---------- numbers ----------
  function pow2Upto(max) {
    var out = [];
    for (var b = 1; b <= max; b *= 2) out.push(b);
    return out;
  }

  function curveBatches(max) { // 8 points per doubling, rounded to whole batches
    var out = [], last = 0;
    for (var k = 0; Math.pow(2, k / 8) <= max + 1e-9; k++) {
      var b = Math.round(Math.pow(2, k / 8));
      if (b !== last) out.push(b);
      last = b;
    }
    return out;
  }

  function compute(s) {
    var m = RM.scenario(s);
    var bend = RM.bend(m), chosen = RM.chosenBatch(m, Number(s.ttft_max_s), MAX_BATCH);
    // the batch axis: 1..1024, or far enough to show the bend's region twice over and the chosen batch
    var want = Math.max(1024, bend.region_high_batch ? 4 * bend.region_high_batch : 0, chosen ? 2 * chosen : 0);
    var xmax = Math.min(MAX_BATCH, Math.pow(2, Math.ceil(Math.log2(want))));
    var grid = curveBatches(xmax), pow2 = pow2Upto(xmax);
    var out = {
      scenario: m, settings: Object.assign({}, s), bend: bend, xmax: xmax,
      curve: RM.rows(m, grid), table: RM.rows(m, pow2),
      fits_batch: RM.fitsBatch(m, MAX_BATCH), chosen_batch: chosen,
    };
    out.waste = RS.mixWaste(m, s.mix, Number(s.batch));
    // the continuous server is {error, field} where its KV pool cannot serve (roofline simulate refuses it)
    Object.assign(out, RS.serveStream(m, s));
    out.compare = DATA.compare.map(function (pair) {
      var ms = RM.scenario(Object.assign({}, s, { card: pair[0], model: pair[1] }));
      return { card: pair[0], model: pair[1], rows: RM.rows(ms, grid) };
    });
    out.measured = DATA.measurements.filter(function (p) {
      return p.card === s.card && p.model === s.model && p.prompt_tokens === m.prompt && p.gen_tokens === m.gen
        && (p.tp || 1) === m.tp && (s.weight_dtype === "bf16" || s.weight_dtype === "fp16") && (s.kv_dtype === "bf16" || s.kv_dtype === "fp16");
    }).map(function (p) {
      var r = RM.row(m, p.batch);
      return { batch: p.batch, tpot_s: p.tpot_s, ttft_s: p.ttft_s, peak_mem_bytes: p.peak_mem_bytes, engine: p.engine,
               throughput_tok_s: p.batch / p.tpot_s, intensity_flop_per_byte: r.intensity_flop_per_byte,
               achieved_flop_per_s: r.linear_flop_per_step / p.tpot_s };
    });
    return out;
  }

  // ---------- formatting ----------
  // text for plotly (titles, legends, hover): its markup characters as the entities plotly decodes
  // (amp, lt, gt), so a name is shown, never parsed as one of the tags plotly reads
  function esc(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function pct(x) { return x === null || x === undefined ? "unmeasured" : "\u00b1" + fmt(100 * x, 0) + "%"; }
  function fmt(x, d) { return x === null || x === undefined ? "-" : Number(x).toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d }); }
  function ms(x) { return fmt(x * 1e3, 2) + " ms"; }
  function col(rows, key, scale) { return rows.map(function (r) { return r[key] * (scale || 1); }); }
  function batchAxis(xmax, title) {
    var ticks = pow2Upto(xmax);
    return { type: "log", title: { text: title || "batch (requests decoded together)" }, tickvals: ticks,
             ticktext: ticks.map(String), range: [Math.log10(0.85), Math.log10(xmax * 1.15)], zeroline: false };
  }
  function vline(x, color, dash, yref) {
    return { type: "line", xref: "x", yref: yref || "paper", x0: x, x1: x, y0: 0, y1: 1,
             line: { color: color, width: 1.5, dash: dash || "dash" } };
  }
  // an annotation at data x on a log x axis (plotly wants log10 of the value there), paper y
  function note(x, y, text, opts) {
    return Object.assign({ x: log10(x), y: y, xref: "x", yref: "paper", text: text, showarrow: false,
                           font: { size: 11 }, bgcolor: "rgba(255,255,255,0.8)" }, opts || {});
  }
  function baseLayout(title) {
    return { title: { text: title, font: { size: 15 } }, font: FONT, margin: { l: 70, r: 70, t: 60, b: 55 },
             legend: { orientation: "h", y: -0.2, x: 0 }, hovermode: "closest", paper_bgcolor: "#fff",
             plot_bgcolor: "#fff", height: 430 };
  }
  function log10(x) { return Math.log(x) / Math.LN10; }
  function calLabel(m) { return m.cal.is_uncalibrated ? "pure roofline" : "calibration " + m.cal.label; }
  function tpText(m) { return m.tp > 1 ? ", TP " + m.tp : ""; }

  // ---------- the panels ----------
  function throughputFigure(r) {
    var m = r.scenario, b = r.bend, batches = col(r.curve, "batch");
    var traces = [
      { x: batches, y: col(r.curve, "throughput_tok_s"), name: "throughput (tok/s)", mode: "lines",
        line: { color: COLORS.thr, width: 2.5 }, hovertemplate: "batch %{x}<br>%{y:,.0f} tok/s<extra></extra>" },
      { x: col(r.table, "batch"), y: col(r.table, "throughput_tok_s"), name: "throughput at powers of two", mode: "markers",
        marker: { color: COLORS.thr, size: 7 }, showlegend: false, hovertemplate: "batch %{x}<br>%{y:,.0f} tok/s<extra></extra>" },
      { x: batches, y: col(r.curve, "tpot_s", 1e3), name: "TPOT (ms)", mode: "lines", yaxis: "y2",
        line: { color: COLORS.tpot, width: 2.5 }, hovertemplate: "batch %{x}<br>TPOT %{y:.2f} ms<extra></extra>" },
      { x: col(r.table, "batch"), y: col(r.table, "tpot_s", 1e3), mode: "markers", yaxis: "y2", showlegend: false,
        marker: { color: COLORS.tpot, size: 7 }, hovertemplate: "batch %{x}<br>TPOT %{y:.2f} ms<extra></extra>" },
    ];
    r.compare.forEach(function (c, i) {
      traces.push({ x: col(c.rows, "batch"), y: col(c.rows, "throughput_tok_s"), mode: "lines",
                    name: esc(c.model + " on " + c.card) + " (tok/s)", line: { width: 1.5, dash: ["dot", "dashdot", "longdash"][i % 3] },
                    hovertemplate: esc(c.model + " / " + c.card) + "<br>batch %{x}<br>%{y:,.0f} tok/s<extra></extra>" });
    });
    if (r.measured.length) {
      traces.push({ x: col(r.measured, "batch"), y: col(r.measured, "throughput_tok_s"), mode: "markers", name: "measured throughput",
                    marker: { symbol: "diamond-open", size: 10, color: COLORS.thr, line: { width: 2 } } });
      traces.push({ x: col(r.measured, "batch"), y: col(r.measured, "tpot_s", 1e3), mode: "markers", name: "measured TPOT", yaxis: "y2",
                    marker: { symbol: "x-open", size: 10, color: COLORS.tpot, line: { width: 2 } } });
    }
    var shapes = [], ann = [], edges;
    if (b.region_low_batch) {
      edges = [0.85, b.region_low_batch, b.region_high_batch, r.xmax * 1.15];
      var names = ["flat: one weight read serves the batch", "bends", "diminishing returns"];
      for (var i = 0; i < 3; i++) {
        shapes.push({ type: "rect", xref: "x", yref: "paper", x0: edges[i], x1: edges[i + 1], y0: 0, y1: 1,
                      fillcolor: REGION_FILL[i], line: { width: 0 }, layer: "below" });
        ann.push(note(Math.sqrt(edges[i] * edges[i + 1]), 0.99, names[i], { yanchor: "top", font: { size: 10, color: "#555" } }));
      }
    } else {
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: 0.85, x1: r.xmax * 1.15, y0: 0, y1: 1,
                    fillcolor: REGION_FILL[0], line: { width: 0 }, layer: "below" });
      ann.push(note(Math.sqrt(r.xmax), 0.99, "flat throughout: decode never bends", { yanchor: "top" }));
    }
    if (b.crossing_batch) {
      shapes.push(vline(b.crossing_batch, "#333", "dash"));
      ann.push(note(b.crossing_batch, 0.55, "intensity = balance point<br>at batch " + b.crossing_batch, { xanchor: "right" }));
    }
    if (b.knee_batch) {
      shapes.push(vline(b.knee_batch, COLORS.tpot, "dot"));
      ann.push(note(b.knee_batch, 0.38, "TPOT knee<br>at batch " + b.knee_batch, { xanchor: "left" }));
    }
    if (r.fits_batch !== null && r.fits_batch < r.xmax) {
      shapes.push(vline(r.fits_batch, "#b00", "solid"));
      ann.push(note(r.fits_batch, 0.75, "memory full<br>above batch " + r.fits_batch, { xanchor: "right", font: { size: 10, color: "#b00" } }));
    }
    var err = r.table[0].expected_error.tpot_fraction;
    if (err !== null) { // TPOT +- the expected error (roofline.confidence), as a band
      traces.push({ x: batches, y: col(r.curve, "tpot_s", 1e3 * (1 + err)), mode: "lines", yaxis: "y2", line: { width: 0 },
                    showlegend: false, hoverinfo: "skip" });
      traces.push({ x: batches, y: col(r.curve, "tpot_s", 1e3 * (1 - err)), mode: "lines", yaxis: "y2", line: { width: 0 },
                    fill: "tonexty", fillcolor: "rgba(224,112,26,0.15)", name: "TPOT " + pct(err) + " (expected error)",
                    hoverinfo: "skip" });
    }
    var layout = baseLayout("Throughput and TPOT vs batch: " + esc(m.model.name + " on " + m.card.id) + tpText(m));
    layout.xaxis = batchAxis(r.xmax);
    layout.yaxis = { title: { text: "throughput (tok/s)", font: { color: COLORS.thr } }, rangemode: "tozero", zeroline: false };
    layout.yaxis2 = { title: { text: "TPOT (ms)", font: { color: COLORS.tpot } }, overlaying: "y", side: "right", rangemode: "tozero",
                      showgrid: false, tickmode: "auto", zeroline: false };
    layout.shapes = shapes;
    layout.annotations = ann;
    return { data: traces, layout: layout };
  }

  function rooflineFigure(r) {
    var m = r.scenario, bal = m.balance, T = 1e12;
    var xs = col(r.table, "intensity_flop_per_byte");
    var lo = Math.min(0.5, Math.min.apply(null, xs) / 2);
    var hi = Math.max(bal * 8, Math.max.apply(null, xs) * 4);
    var roofX = [lo, bal, hi], roofY = [m.bw * lo / T, m.peak / T, m.peak / T];
    var traces = [
      { x: roofX, y: roofY, mode: "lines", name: "roofline: bandwidth slope, then compute ceiling",
        line: { color: COLORS.roof, width: 3 }, hovertemplate: "%{x:.1f} FLOP/byte<br>%{y:.2f} TFLOP/s<extra></extra>" },
      { x: [bal], y: [m.peak / T], mode: "markers+text", name: "balance point", text: ["balance " + fmt(bal, 1) + " FLOP/byte"],
        textposition: "top left", marker: { size: 11, color: COLORS.roof, symbol: "circle-open", line: { width: 2 } } },
    ];
    if (!m.cal.is_uncalibrated) {
      var bwEff = m.cal.bandwidth_efficiency * m.bw, pkEff = m.cal.compute_efficiency * m.peak, balEff = pkEff / bwEff;
      traces.push({ x: [lo, balEff, hi], y: [bwEff * lo / T, pkEff / T, pkEff / T], mode: "lines",
                    name: "calibrated ceilings (" + fmt(100 * m.cal.bandwidth_efficiency, 0) + "% bandwidth, "
                      + fmt(100 * m.cal.compute_efficiency, 0) + "% compute)", line: { color: COLORS.cal, width: 1.5, dash: "dash" } });
    }
    var lastLabelled = 0; // label a point only where it is clear of the last labelled one
    var labels = r.table.map(function (row) {
      if (Math.log(row.intensity_flop_per_byte / lastLabelled) < 0.45) return "";
      lastLabelled = row.intensity_flop_per_byte;
      return "B=" + row.batch;
    });
    traces.push({ x: xs, y: r.table.map(function (row) { return row.linear_flop_per_step / row.tpot_s / T; }),
                  mode: "markers+text+lines", name: "predicted operating point per batch", text: labels,
                  customdata: col(r.table, "batch"),
                  textposition: "bottom right", textfont: { size: 10 }, line: { color: COLORS.thr, width: 1, dash: "dot" },
                  marker: { size: 8, color: COLORS.thr },
                  hovertemplate: "batch %{customdata}<br>intensity %{x:.1f} FLOP/byte<br>%{y:.3f} TFLOP/s<extra></extra>" });
    if (r.measured.length) {
      traces.push({ x: col(r.measured, "intensity_flop_per_byte"), y: col(r.measured, "achieved_flop_per_s", 1 / T), mode: "markers",
                    name: "measured (model's FLOPs / measured TPOT)", text: col(r.measured, "batch").map(function (b) { return "B=" + b; }),
                    marker: { symbol: "diamond-open", size: 10, color: COLORS.meas, line: { width: 2 } },
                    hovertemplate: "measured %{text}<br>%{x:.1f} FLOP/byte<br>%{y:.3f} TFLOP/s<extra></extra>" });
    }
    var layout = baseLayout("Roofline: " + esc(m.card.id) + tpText(m) + " (" + fmt(m.bw / 1e9, 0) + " GB/s, " + fmt(m.peak / T, 1) + " TFLOP/s bf16)");
    layout.xaxis = { type: "log", title: { text: "arithmetic intensity (FLOP/byte): weight-matmul FLOPs / (weight + KV bytes)" }, range: [log10(lo), log10(hi)], dtick: 1 };
    layout.yaxis = { type: "log", title: { text: "attainable FLOP/s (TFLOP/s)" }, dtick: 1 };
    layout.shapes = [{ type: "line", xref: "x", yref: "paper", x0: bal, x1: bal, y0: 0, y1: 1, line: { color: "#999", width: 1, dash: "dot" } }];
    var lim = r.bend.intensity_limit_flop_per_byte;
    if (isFinite(lim) && lim < hi) {
      layout.shapes.push({ type: "line", xref: "x", yref: "paper", x0: lim, x1: lim, y0: 0, y1: 1, line: { color: COLORS.kv, width: 1.5, dash: "dash" } });
      layout.annotations = [note(lim, 0.05, "KV cache caps intensity<br>at " + fmt(lim, 1) + " FLOP/byte", { xanchor: "right", font: { size: 10 } })];
    }
    return { data: traces, layout: layout };
  }

  function ttftFigure(r) {
    var m = r.scenario, s = r.settings, lim = Number(s.ttft_max_s), c = r.chosen_batch;
    var traces = [
      { x: col(r.curve, "batch"), y: col(r.curve, "ttft_s"), mode: "lines", name: "TTFT (s): the whole batch is prefilled together",
        line: { color: COLORS.ttft, width: 2.5 }, hovertemplate: "batch %{x}<br>TTFT %{y:.3f} s<extra></extra>" },
      { x: col(r.table, "batch"), y: col(r.table, "ttft_s"), mode: "markers", showlegend: false, marker: { color: COLORS.ttft, size: 7 },
        hovertemplate: "batch %{x}<br>TTFT %{y:.3f} s<extra></extra>" },
      { x: [0.85, r.xmax * 1.15], y: [lim, lim], mode: "lines", name: "latency limit " + fmt(lim, 2) + " s",
        line: { color: "#b00", width: 1.5, dash: "dash" } },
    ];
    var ann = [];
    if (c !== null) {
      var rc = RM.row(m, c);
      traces.push({ x: [c], y: [rc.ttft_s], mode: "markers+text", name: "chosen batch " + c, text: ["batch " + c + ": " + fmt(rc.throughput_tok_s, 0) + " tok/s"],
                    textposition: "top left", marker: { symbol: "star", size: 15, color: "#b00" } });
    } else {
      ann.push({ xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false, text: "no batch meets the limit", font: { size: 14, color: "#b00" } });
    }
    var ttfts = r.measured.filter(function (p) { return p.ttft_s !== null; });
    if (ttfts.length) {
      traces.push({ x: col(ttfts, "batch"), y: col(ttfts, "ttft_s"), mode: "markers", name: "measured TTFT",
                    marker: { symbol: "diamond-open", size: 10, color: COLORS.meas, line: { width: 2 } } });
    }
    var layout = baseLayout("TTFT vs batch, limit " + fmt(lim, 2) + " s" + (c !== null ? ": largest batch " + c : ""));
    layout.xaxis = batchAxis(r.xmax);
    layout.yaxis = { type: "log", title: { text: "time to first token (s)" }, dtick: 1 };
    layout.shapes = c !== null ? [vline(c, "#b00", "dot")] : [];
    layout.annotations = ann;
    return { data: traces, layout: layout };
  }

  function memoryFigure(r) {
    var m = r.scenario, x = col(r.curve, "batch");
    var parts = [["weights_bytes", "weights", COLORS.weights], ["kv_cache_bytes", "KV cache", COLORS.kv],
                 ["activations_bytes", "activations", COLORS.act], ["logits_bytes", "logits", COLORS.logits],
                 ["workspace_bytes", "workspace", COLORS.work]];
    var traces = parts.map(function (p) {
      return { x: x, y: col(r.curve, p[0], 1 / GiB), name: p[1], stackgroup: "mem", mode: "lines",
               line: { width: 0.5, color: p[2] }, fillcolor: p[2],
               hovertemplate: p[1] + " %{y:.2f} GiB<br>batch %{x}<extra></extra>" };
    });
    var cap = m.card.memory_bytes / GiB;
    traces.push({ x: [0.85, r.xmax * 1.15], y: [cap, cap], mode: "lines", name: esc(m.card.id) + " capacity " + fmt(cap, 1) + " GiB" + (m.tp > 1 ? " per GPU" : ""),
                  line: { color: "#b00", width: 2, dash: "dash" } });
    var meas = r.measured.filter(function (p) { return p.peak_mem_bytes !== null; });
    if (meas.length) {
      traces.push({ x: col(meas, "batch"), y: col(meas, "peak_mem_bytes", 1 / GiB), mode: "markers", name: "measured peak",
                    marker: { symbol: "diamond-open", size: 10, color: COLORS.meas, line: { width: 2 } } });
    }
    var peakMax = Math.max.apply(null, col(r.curve, "peak_mem_bytes", 1 / GiB));
    var layout = baseLayout("Peak memory" + (m.tp > 1 ? " per GPU" : "") + " vs batch (GiB), " + esc(m.model.name + " on " + m.card.id) + tpText(m)
                            + (r.fits_batch === null ? ": weights alone do not fit" : ": fits up to batch " + r.fits_batch));
    layout.xaxis = batchAxis(r.xmax);
    // up to 2.5x the card (the prefill's activations at huge batches would flatten the rest), but
    // always the whole of the weights
    var top = Math.max(cap * 1.1, Math.min(peakMax, Math.max(cap * 2.5, r.curve[0].weights_bytes / GiB * 1.3)));
    layout.yaxis = { title: { text: "peak memory (GiB, 2^30 bytes)" }, range: [0, top * 1.05], rangemode: "tozero" };
    return { data: traces, layout: layout };
  }

  function slotsFigure(r) {
    var w = r.waste, b = Number(r.settings.batch), base = 0, yUsed = [], xUsed = [], bUsed = [], yIdle = [], xIdle = [], bIdle = [];
    var text = [], hidx = [];
    w.batch_list.forEach(function (bt, k) {
      for (var i = bt.start; i < bt.end; i++) {
        var slot = i - bt.start, g = w.gens[i];
        yUsed.push(slot); xUsed.push(g); bUsed.push(base);
        text.push("batch " + (k + 1) + ", slot " + slot + ": needs " + g + " tokens");
        if (g < bt.longest) { yIdle.push(slot); xIdle.push(bt.longest - g); bIdle.push(base + g); hidx.push("batch " + (k + 1) + ", slot " + slot + ": idle " + (bt.longest - g) + " steps"); }
      }
      base += bt.longest;
    });
    var traces = [
      { type: "bar", orientation: "h", y: yUsed, x: xUsed, base: bUsed, name: "used slot-steps (tokens someone needs)",
        width: 0.8, marker: { color: COLORS.used }, text: text, hovertemplate: "%{text}<extra></extra>", textposition: "none" },
      { type: "bar", orientation: "h", y: yIdle, x: xIdle, base: bIdle, name: "idle slot-steps (waiting for the batch's longest)",
        width: 0.8, marker: { color: COLORS.idle, opacity: 0.75 }, text: hidx, hovertemplate: "%{text}<extra></extra>", textposition: "none" },
    ];
    var short = w.classes.reduce(function (a, c) { return c.gen_tokens < a.gen_tokens ? c : a; });
    var layout = baseLayout("Static batching of " + esc(r.settings.mix) + " in batches of " + b + ": "
                            + fmt(100 * w.waste_fraction, 1) + "% of slots idle");
    layout.barmode = "overlay";
    layout.bargap = 0.15;
    layout.xaxis = { title: { text: "decode step (batches run one after another)" }, rangemode: "tozero" };
    var rowsShown = Math.min(b, w.requests);
    layout.yaxis = { title: { text: "slot" }, range: [rowsShown - 0.5, -0.5], dtick: Math.max(1, Math.ceil(rowsShown / 16)), zeroline: false };
    layout.annotations = [{ xref: "paper", yref: "paper", x: 1, y: 1.0, xanchor: "right", yanchor: "bottom", showarrow: false, align: "right",
      font: { size: 11 }, text: fmt(w.tokens_needed, 0) + " tokens needed / " + fmt(w.slots_used, 0) + " slot-steps; a "
        + short.gen_tokens + "-token request: " + fmt(short.e2e_in_batch_s, 2) + " s in the batch vs " + fmt(short.e2e_alone_s, 2)
        + " s alone (" + fmt(short.slowdown, 1) + "x)" }];
    layout.margin.t = 75;
    return { data: traces, layout: layout };
  }

  function servingFigure(r) {
    var st = r.serve_static, ct = r.serve_continuous, n = st.finish_s.length, refused = !!ct.error;
    function done(out) {
      var f = out.finish_s.slice().sort(function (a, b) { return a - b; }), x = [0], y = [0];
      f.forEach(function (t, i) { x.push(t); y.push(i); x.push(t); y.push(i + 1); });
      return { x: x, y: y };
    }
    function label(name, s) {
      return name + ": " + fmt(s.throughput_tok_s, 0) + " tok/s, E2E p50 " + fmt(s.e2e_p50_s, 2) + " s, "
        + fmt(100 * s.waste_fraction, 0) + "% slots idle";
    }
    var a = done(st);
    var traces = [
      { x: a.x, y: a.y, mode: "lines", name: label("static (" + r.settings.return_policy + ")", st.summary), line: { color: COLORS.statik, width: 2.5, shape: "hv" },
        hovertemplate: "static: %{y} done by %{x:.2f} s<extra></extra>" },
    ];
    if (refused) { // nothing to draw: the note under the chart says why (servingNote)
      traces.push({ x: [0], y: [0], mode: "lines", name: "continuous: cannot serve this stream (see below)",
                    line: { color: COLORS.cont, width: 2.5, dash: "dot" }, hoverinfo: "skip" });
    } else { // served requests only: a rejected one never finishes
      var c = done({ finish_s: ct.finish_s.filter(function (t) { return !isNaN(t); }) }), cs = ct.summary;
      traces.push({ x: c.x, y: c.y, mode: "lines", name: label("continuous", cs) + (cs.preemptions ? ", " + cs.preemptions + " preemptions" : ""),
                    line: { color: COLORS.cont, width: 2.5, shape: "hv" },
                    hovertemplate: "continuous: %{y} done by %{x:.2f} s<extra></extra>" });
    }
    var layout = baseLayout("Same stream, static vs continuous: " + n + " requests (" + esc(r.settings.mix) + " repeated), "
                            + r.settings.batch + " slots");
    layout.xaxis = { title: { text: "time since the burst arrived (s)" }, rangemode: "tozero" };
    layout.yaxis = { title: { text: "requests finished" }, rangemode: "tozero" };
    layout.legend = { orientation: "v", x: 0.01, y: 0.99, bgcolor: "rgba(255,255,255,0.85)" };
    return { data: traces, layout: layout };
  }

  var FIGURES = { "plot-throughput": throughputFigure, "plot-roofline": rooflineFigure, "plot-ttft": ttftFigure,
                  "plot-memory": memoryFigure, "plot-slots": slotsFigure, "plot-serving": servingFigure };

  // ---------- page ----------
  // the summary under the controls: text nodes only (names come from files)
  function node(tag, text, cls) {
    var el = document.createElement(tag);
    if (text !== undefined) el.textContent = text;
    if (cls) el.className = cls;
    return el;
  }
  function summaryNodes(r) {
    var m = r.scenario, b = r.bend, row1 = r.table[0], out = [], p = node("span");
    p.append(node("b", m.model.name), " on ", node("b", m.card.name),
             (m.tp > 1 ? " x " + m.tp + " (tensor parallel)" : "") + ": prompt " + m.prompt + ", gen " + m.gen + ", weights "
             + m.weightDtype + ", KV " + m.kvDtype + " (" + m.kvCache + " cache)"
             + (m.model.moe_layers ? ", " + (m.skew > 0 ? "routing skew " + m.skew : "uniform routing") : "") + "; " + calLabel(m) + ". ");
    out.push(p);
    var moe = b.num_experts ? (b.experts_saturated_batch !== null ? "a step touches 90% of the " + b.num_experts
      + " experts from batch " + b.experts_saturated_batch + " (the first bend); " : "a step touches fewer than 90% of the "
      + b.num_experts + " experts below batch " + MAX_BATCH + "; ") : "";
    out.push(node("span", "Balance point " + fmt(m.balance, 1) + " FLOP/byte; " + moe + (b.region_low_batch ? "decode bends between batch "
      + b.region_low_batch + " and " + b.region_high_batch + (b.crossing_batch ? " (intensity reaches the balance point at batch "
      + b.crossing_batch + ")" : "") : "decode never bends (intensity tops out at " + fmt(b.intensity_limit_flop_per_byte, 1)
      + " FLOP/byte)") + ". "));
    out.push(node("span", "Batch 1: TPOT " + ms(row1.tpot_s) + ", " + fmt(row1.throughput_tok_s, 1) + " tok/s; "
      + (r.chosen_batch ? "largest batch with TTFT under " + fmt(Number(r.settings.ttft_max_s), 2) + " s: " + r.chosen_batch
        : "no batch meets the TTFT limit") + ". "));
    var e = row1.expected_error, conf = RM.confidence(m);
    out.push(node("span", "Expected error: TPOT " + pct(e.tpot_fraction) + ", TTFT " + pct(e.ttft_fraction) + " (batch 1), peak memory "
      + pct(e.peak_mem_fraction) + "; from " + conf.errors.basis + ". ", "confidence"));
    var reasons = conf.extrapolation.common.slice();
    if (conf.extrapolation.batch_max !== null) {
      reasons.push("batches above " + RooflineModel.thousands(conf.extrapolation.batch_max) + " beyond the calibration's");
    }
    var ex = node("span", "", "extrapolation");
    ex.textContent = reasons.length ? "Extrapolating (the expected error is then a lower bound): " + reasons.join("; ") + ". "
      : "Inside what the calibration measured. ";
    if (reasons.length) ex.classList.add("warn");
    out.push(ex);
    if (r.fits_batch === null) {
      out.push(node("span", "The weights alone (" + fmt(m.weightResident / GiB, 1) + " GiB" + (m.tp > 1 ? " per GPU" : "")
        + ") do not fit in the card's " + fmt(m.card.memory_bytes / GiB, 1) + " GiB: these times assume a card that could hold them. ", "warn"));
    }
    if (m.cal.is_uncalibrated) out.push(node("span", "No fitted calibration for this card: ceilings alone, expect optimistic TPOT.", "warn"));
    return out;
  }

  // under the serving chart: the continuous server's KV pool, what ran, or why it cannot serve (text only)
  function servingNote(r) {
    var ct = r.serve_continuous;
    if (ct.error) return { text: "The continuous server cannot serve this stream: " + ct.error + ".", warn: true };
    var s = ct.summary, p = ct.pool, GiBs = function (x) { return fmt(x / GiB, 2) + " GiB"; };
    var text = "Continuous server: a KV pool of " + fmt(p.capacity_tokens, 0) + " tokens (" + fmt(p.num_blocks, 0) + " blocks of "
      + p.block_size + "): " + RS.formatG(p.gpu_memory_utilization) + " x " + GiBs(p.memory_bytes) + " less weights "
      + GiBs(p.weights_bytes) + ", workspace and activations " + GiBs(p.workspace_bytes + p.activations_bytes)
      + (p.engine_reserve_bytes ? ", the engine's reserve " + GiBs(p.engine_reserve_bytes) : "")
      + (r.scenario.tp > 1 ? " (per GPU)" : "") + ". At most " + s.max_running + " of " + r.settings.batch
      + " slots ran at once; " + (s.preemptions ? s.preemptions + " preemptions (" + s.preempted_requests
      + " requests recomputed)" : "no preemption") + "; TPOT p50 " + (s.tpot_p50_s === null ? "-" : ms(s.tpot_p50_s))
      + ", p99 " + (s.tpot_p99_s === null ? "-" : ms(s.tpot_p99_s)) + ".";
    if (s.rejected) {
      text += " " + s.rejected + " of " + s.requests + " requests rejected: each needs more KV than the pool holds"
        + (r.scenario.model.max_position_embeddings ? " or more than the model's " + fmt(r.scenario.model.max_position_embeddings, 0)
        + " positions" : "") + ".";
    }
    return { text: text, warn: !!(s.rejected || s.preemptions) };
  }

  function readControls() {
    var s = Object.assign({}, state);
    document.querySelectorAll("[data-setting]").forEach(function (el) {
      var k = el.getAttribute("data-setting"), v = el.value;
      if (k === "calibrated") s[k] = v === "fitted";
      else if (el.type === "number" || k === "tp") s[k] = Number(v);
      else s[k] = v;
    });
    return s;
  }

  function validate(s) {
    [["prompt_tokens", "prompt length"], ["gen_tokens", "generation length"], ["batch", "slots (batch)"], ["stream_count", "stream requests"]].forEach(function (p) {
      var v = s[p[0]];
      if (!(Number.isInteger(v) && v >= 1)) throw new Error(p[1] + " must be a whole number of at least 1");
    });
    if (s.stream_count > 20000) throw new Error("stream requests: at most 20000");
    if (!(s.ttft_max_s > 0)) throw new Error("the TTFT limit must be a positive number of seconds");
    if (s.batch > DATA.server.max_num_seqs) throw new Error("slots (batch): at most " + DATA.server.max_num_seqs);
    if (!(s.gpu_memory_utilization > 0 && s.gpu_memory_utilization <= 1)) {
      throw new Error("GPU memory used by the engine: a fraction of the card's memory in (0, 1]");
    }
    RS.parseMix(s.mix);
  }

  function draw(s) {
    var t0 = performance.now();
    validate(s);
    var r = compute(s);
    var t1 = performance.now();
    var jobs = PLOTS.map(function (id) {
      var f = FIGURES[id](r);
      // newPlot, not react: with every trace's data new on each redraw, a fresh plot is faster (no diff)
      return Plotly.newPlot(document.getElementById(id), f.data, f.layout, CONFIG);
    });
    document.getElementById("summary").replaceChildren.apply(document.getElementById("summary"), summaryNodes(r));
    var note = servingNote(r), noteEl = document.getElementById("serving-note");
    noteEl.textContent = note.text;
    noteEl.className = note.warn ? "note warn" : "note";
    var moe = RM.MODELS[s.model].moe_layers > 0; // the routing skew matters for a mixture of experts only
    document.getElementById("ctl-skew-label").style.display = moe ? "" : "none";
    state = s;
    window.rooflineLast = r;
    return Promise.all(jobs).then(function () {
      var t2 = performance.now();
      return { compute_ms: t1 - t0, total_ms: t2 - t0 };
    });
  }

  function redrawFromControls() {
    var status = document.getElementById("status");
    var s = readControls();
    try {
      window.rooflineLastDraw = draw(s);
      status.textContent = "";
      status.className = "";
    } catch (e) {
      status.textContent = e.message;
      status.className = "error";
      window.rooflineLastDraw = Promise.resolve(null);
    }
    return window.rooflineLastDraw;
  }

  function fillControls() {
    var card = document.getElementById("ctl-card"), model = document.getElementById("ctl-model");
    DATA.cards.forEach(function (c) {
      var o = document.createElement("option");
      o.value = c.id; o.textContent = c.id + " - " + c.name + (!c.fitted ? "" : (c.fitted.fit_report || {}).transferred
        ? " (" + c.fitted.engine + ", transferred)" : " (calibrated)");
      card.appendChild(o);
    });
    DATA.models.forEach(function (m) {
      var o = document.createElement("option");
      o.value = m.name; o.textContent = m.name;
      model.appendChild(o);
    });
    var tp = document.getElementById("ctl-tp");
    DATA.tp_choices.forEach(function (t) {
      var o = document.createElement("option");
      o.value = String(t); o.textContent = t === 1 ? "1 (one GPU)" : t + " GPUs";
      tp.appendChild(o);
    });
    ["ctl-weight-dtype", "ctl-kv-dtype"].forEach(function (id) {
      var el = document.getElementById(id);
      DATA.dtypes.forEach(function (d) { var o = document.createElement("option"); o.value = d; o.textContent = d; el.appendChild(o); });
    });
    document.querySelectorAll("[data-setting]").forEach(function (el) {
      var k = el.getAttribute("data-setting");
      el.value = k === "calibrated" ? (state.calibrated ? "fitted" : "pure") : state[k];
      el.addEventListener("change", redrawFromControls);
    });
  }

  function setControl(setting, value) {
    var el = document.querySelector("[data-setting='" + setting + "']");
    el.value = value;
    el.dispatchEvent(new Event("change"));
    return window.rooflineLastDraw;
  }

  // ---------- what the tests read ----------
  window.rooflineCompute = function (settings) { return Object.assign(RM.compute(settings), RS.compute(settings)); };

  function plotStats() {
    var out = {};
    PLOTS.forEach(function (id) {
      var gd = document.getElementById(id), pts = 0;
      (gd.data || []).forEach(function (t) { pts += (t.x || []).length; });
      out[id] = { traces: (gd.data || []).length, points: pts, svg_traces: gd.querySelectorAll("g.trace").length,
                  drawn_paths: gd.querySelectorAll("g.trace path, g.trace rect, g.points path").length,
                  width: gd.getBoundingClientRect().width, height: gd.getBoundingClientRect().height };
    });
    return out;
  }

  function fingerprint() {
    var gd = document.getElementById("plot-throughput");
    return { card: state.card, throughput: gd.data[0].y.slice(0, 8), roofline_y: document.getElementById("plot-roofline").data[0].y.slice(),
             memory_capacity: document.getElementById("plot-memory").data[5].y[0] };
  }

  window.rooflineSelfTest = async function () {
    var out = { initial: Object.assign({}, state), plots: plotStats() };
    var before = fingerprint();
    var other = DATA.cards.map(function (c) { return c.id; }).filter(function (id) { return id !== state.card; });
    var to = other.indexOf("h200") >= 0 ? "h200" : other[0];
    var t0 = performance.now();
    await setControl("card", to);
    var switchMs = performance.now() - t0;
    var after = fingerprint();
    out.card_switch = { from: before.card, to: to, before: before, after: after, redraw_ms: switchMs, plots_after: plotStats(),
                        changed: JSON.stringify(before.throughput) !== JSON.stringify(after.throughput)
                          && JSON.stringify(before.roofline_y) !== JSON.stringify(after.roofline_y) };
    // redraw timings: every card once, then every model once, each through its control
    var times = [];
    for (var i = 0; i < DATA.cards.length; i++) {
      t0 = performance.now();
      await setControl("card", DATA.cards[i].id);
      times.push(performance.now() - t0);
    }
    await setControl("card", out.initial.card);
    for (i = 0; i < DATA.models.length; i++) {
      t0 = performance.now();
      await setControl("model", DATA.models[i].name);
      times.push(performance.now() - t0);
    }
    await setControl("model", out.initial.model);
    var sorted = times.slice().sort(function (a, b) { return a - b; });
    out.redraw_ms = { count: times.length, median: sorted[Math.floor(sorted.length / 2)], max: sorted[sorted.length - 1],
                      all: times };
    out.restored = fingerprint();
    var pre = document.getElementById("selftest");
    pre.textContent = JSON.stringify(out);
    window.rooflineSelfTestResult = out;
    return out;
  };

  // ---------- start ----------
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      PLOTS.forEach(function (id) { Plotly.Plots.resize(document.getElementById(id)); });
    }, 100);
  });
  fillControls();
  redrawFromControls().then(function (t) {
    window.rooflineFirstDraw = t;
    window.rooflineReady = true;
    if (/[?&]selftest=1/.test(window.location.search)) window.rooflineSelfTest();
  });
})();
