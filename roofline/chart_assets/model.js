/* The roofline model, ported from the Python package so the page can redraw every what-if
 * without a server. Each function names the Python function it mirrors and keeps its order of
 * operations (floating point: the port agrees to ~1e-12, the tests ask 1e-9); the numbers it
 * reads come from roofline.chart_data.page_data(). tests/test_model_js.py runs this file under
 * node against the Python package on many scenarios; the browser test checks the page.
 * The static batching and the two servers are ported apart, in serving.js.
 * Base units throughout: bytes, FLOP, seconds, bytes/s, FLOP/s. */
"use strict";

var RooflineModel = (function () {
  var SAMPLES = 16; // roofline.decode.decode_contexts(samples=16)
  var BOUNDS = ["overhead", "memory", "compute"]; // roofline.step.BOUNDS
  var SIZE_MARGIN = 1.25; // roofline.confidence.SIZE_MARGIN
  var MIN_BIN_POINTS = 8; // roofline.confidence.MIN_BIN_POINTS
  var OVERHEAD_SHARE_MARGIN = 0.02; // roofline.confidence.OVERHEAD_SHARE_MARGIN
  var TOUCHED_MAX_TOKENS = 65536; // roofline.step._touched_table(max_tokens=1 << 16)
  var SMALL_TILE = [64, 128], LARGE_TILE = [128, 256], SMALL_TILE_ROWS_PER_EXPERT = 129; // roofline.step
  var SMALL_INDEX_MAX_ROWS = 16; // roofline.index_kernels
  var TABLE_ROWS_UP_TO = 32.0, TILE_ROWS_FROM = 128.0; // roofline.step: the grouped-mm table up to, the tiles from
  var TILE_TABLE_MAX_TOKENS = 8192; // roofline.step.TILE_TABLE_MAX_TOKENS
  var ERROR_KEYS = { tpot: "tpot_mape_fraction", ttft: "ttft_mape_fraction", ttft_large: "ttft_mape_fraction_batch_64_up",
                     peak_mem: "peak_mem_mape_fraction" }; // roofline.confidence._KEYS

  // ---- helpers with Python's semantics ----
  // numpy.interp for increasing xp (left/right: the end values unless given; NaN for right=NaN);
  // fp(j) gives the j-th value on demand
  function interp(x, xp, fp, right) {
    var n = xp.length;
    if (x > xp[n - 1]) return right === undefined ? fp(n - 1) : right;
    if (x === xp[n - 1]) return fp(n - 1);
    if (x < xp[0]) return fp(0);
    var lo = 0, hi = n - 1; // xp[lo] <= x < xp[hi]
    while (hi - lo > 1) {
      var mid = (lo + hi) >> 1;
      if (xp[mid] <= x) lo = mid; else hi = mid;
    }
    if (xp[lo] === x) return fp(lo);
    var f0 = fp(lo), f1 = fp(lo + 1);
    var slope = (f1 - f0) / (xp[lo + 1] - xp[lo]);
    var res = slope * (x - xp[lo]) + f0;
    if (isNaN(res)) {
      res = slope * (x - xp[lo + 1]) + f1;
      if (isNaN(res) && f0 === f1) res = f0;
    }
    return res;
  }

  // Python's f"{n:,}" for a whole number
  function thousands(n) {
    var s = String(Math.trunc(Math.abs(n))), out = "";
    while (s.length > 3) { out = "," + s.slice(-3) + out; s = s.slice(0, -3); }
    return (n < 0 ? "-" : "") + s + out;
  }

  // Python's f"{x:.2g}" for a positive finite x (ties, which Python rounds to even, aside)
  function formatG2(x) {
    var e = Number(x.toExponential(1).split("e")[1]);
    if (e < -4 || e >= 2) {
      var parts = x.toExponential(1).split("e"), mant = parts[0].replace(/\.?0+$/, "");
      var exp = Number(parts[1]);
      return mant + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    }
    var s = x.toFixed(Math.max(0, 1 - e));
    return s.indexOf(".") >= 0 ? s.replace(/\.?0+$/, "") : s;
  }

  function mean(values) {
    var v = values.filter(function (x) { return x !== null && x !== undefined; });
    if (!v.length) return null;
    var s = 0;
    for (var i = 0; i < v.length; i++) s += v[i];
    return s / v.length;
  }

  function create(DATA) {
    var CARDS = {}, MODELS = {};
    DATA.cards.forEach(function (c) { CARDS[c.id] = c; });
    DATA.models.forEach(function (m) { MODELS[m.name] = m; });
    var MAX_EXPONENT = DATA.max_exponent; // roofline.calibration.MAX_EXPONENT
    var KNEE_ELASTICITY = DATA.knee_elasticity; // roofline.prediction.KNEE_ELASTICITY

    // roofline.step.pnorm: a sum at p <= 1, exactly the max at p >= MAX_EXPONENT, a blend between
    function pnorm(a, b, p) {
      if (p <= 1.0) return a + b;
      var hi = a >= b ? a : b, lo = a >= b ? b : a;
      if (p >= MAX_EXPONENT || hi <= 0.0) return hi;
      return hi * Math.exp(Math.log1p(Math.pow(lo / hi, p)) / p);
    }

    function dtypeBytes(name) {
      var b = DATA.dtype_bytes[name];
      if (b === undefined) throw new Error("unknown dtype '" + name + "'");
      return b;
    }

    // roofline.step.kv_heads_share
    function kvHeadsShare(kind, kvHeads, tp) {
      if (kind === "mla" || tp === 1) return 1.0;
      return Math.max(1.0 / tp, 1.0 / kvHeads);
    }

    // roofline.step._touched_table: (tokens grid, experts touched) under skewed routing
    var TOUCHED_GRID = null, TABLES = {};
    function touchedGrid() {
      if (!TOUCHED_GRID) { // numpy.unique(concat(arange(0, 1025), geomspace(1024, 65536, 400)))
        TOUCHED_GRID = [];
        for (var i = 0; i <= 1024; i++) TOUCHED_GRID.push(i);
        var ratio = Math.log(TOUCHED_MAX_TOKENS / 1024);
        for (i = 1; i < 399; i++) TOUCHED_GRID.push(1024 * Math.exp(ratio * i / 399));
        TOUCHED_GRID.push(TOUCHED_MAX_TOKENS);
      }
      return TOUCHED_GRID;
    }
    function touchedTable(experts, topK, skew) {
      var key = experts + "/" + topK + "/" + skew;
      if (TABLES[key]) return TABLES[key];
      var q = routingProbabilities(experts, topK, skew), i;
      var logMiss = new Float64Array(experts);
      for (i = 0; i < experts; i++) logMiss[i] = Math.log1p(-Math.min(q[i], 1.0 - 1e-15));
      var grid = touchedGrid(), values = new Float64Array(grid.length);
      for (var g = 0; g < grid.length; g++) {
        var miss = 0.0;
        for (i = 0; i < experts; i++) miss += Math.exp(grid[g] * logMiss[i]);
        values[g] = experts - miss;
      }
      TABLES[key] = { grid: grid, values: values };
      return TABLES[key];
    }

    // roofline.step.routing_probabilities
    function routingProbabilities(experts, topK, skew) {
      var q = new Float64Array(experts), i;
      if (skew <= 0) { for (i = 0; i < experts; i++) q[i] = topK / experts; return q; }
      var p = new Float64Array(experts), pmin = Infinity;
      for (i = 0; i < experts; i++) { p[i] = 1.0 / Math.pow(i + 1, skew); pmin = Math.min(pmin, p[i]); }
      var lo = 0.0, hi = topK / pmin;
      for (var it = 0; it < 200; it++) { // bisection on c: sum of min(1, c p_i) grows from 0 to E >= k
        var c = 0.5 * (lo + hi), sum = 0.0;
        for (i = 0; i < experts; i++) sum += Math.min(1.0, c * p[i]);
        if (sum < topK) lo = c; else hi = c;
      }
      for (i = 0; i < experts; i++) q[i] = Math.min(1.0, hi * p[i]);
      return q;
    }

    // roofline.step.tile_grid
    function tileGrid(experts, topK) {
      var sw = Math.ceil(SMALL_TILE_ROWS_PER_EXPERT * experts / topK), pts = [], i;
      for (i = 0; i <= 1024; i++) pts.push(i);
      var ratio = Math.log(TILE_TABLE_MAX_TOKENS / 1024);
      for (i = 0; i <= 200; i++) pts.push(Math.floor(1024 * Math.exp(ratio * i / 200) + 0.5));
      pts.push(sw - 1, sw);
      pts.sort(function (a, b) { return a - b; });
      return pts.filter(function (x, j) { return j === 0 || x !== pts[j - 1]; });
    }

    // roofline.grouped_mm._bracket: lower index and fraction of x between two nodes (edge pair outside)
    function bracket(nodes, x) {
      var i = 0;
      while (i < nodes.length - 2 && nodes[i + 1] < x) i++;
      return [i, (x - nodes[i]) / (nodes[i + 1] - nodes[i])];
    }
    // roofline.grouped_mm.shape_log_seconds: log seconds of one grouped matmul (inner k, output n) at
    // the table's groups x rows nodes, bilinear in log K and log N; beyond them ∝ K·N
    function shapeLogSeconds(t, k, n) {
      var lk = t.ks.map(Math.log), ln = t.ns.map(Math.log), xk = Math.log(k), xn = Math.log(n);
      var ck = Math.min(Math.max(xk, lk[0]), lk[lk.length - 1]), cn = Math.min(Math.max(xn, ln[0]), ln[ln.length - 1]);
      var a = bracket(lk, ck), b = bracket(ln, cn), out = [];
      var corners = [[a[0], 1.0 - a[1]], [a[0] + 1, a[1]]], cornersN = [[b[0], 1.0 - b[1]], [b[0] + 1, b[1]]];
      for (var g = 0; g < t.groups.length; g++) {
        var row = [];
        for (var r = 0; r < t.rows.length; r++) {
          var v = 0.0;
          corners.forEach(function (ca) {
            cornersN.forEach(function (cb) {
              if (ca[1] * cb[1]) v += ca[1] * cb[1] * Math.log(t.seconds[ca[0]][cb[0]][g][r]);
            });
          });
          row.push(v + (xk - ck) + (xn - cn));
        }
        out.push(row);
      }
      return out;
    }
    // roofline.grouped_mm.layer_nodes: a MoE layer's gate-up (K hidden, N 2 x inter) and down (K inter, N hidden)
    function layerNodes(t, hidden, inter) {
      var gu = shapeLogSeconds(t, hidden, 2.0 * inter), dn = shapeLogSeconds(t, inter, hidden);
      return { lg: t.groups.map(Math.log), lr: t.rows.map(Math.log),
               ls: gu.map(function (row, g) { return row.map(function (v, r) { return Math.log(Math.exp(v) + Math.exp(dn[g][r])); }); }) };
    }
    // roofline.grouped_mm.nodes_seconds: bilinear in log groups and log rows; past the last node ∝ the count
    function nodesSeconds(nd, touched, rows) {
      var xg = Math.log(Math.max(touched, 1.0)), xr = Math.log(Math.max(rows, 1.0));
      var cg = Math.min(xg, nd.lg[nd.lg.length - 1]), cr = Math.min(xr, nd.lr[nd.lr.length - 1]);
      var a = bracket(nd.lg, xg), b = bracket(nd.lr, xr);
      var ig = a[0], ir = b[0];
      var fg = (cg - nd.lg[ig]) / (nd.lg[ig + 1] - nd.lg[ig]), fr = (cr - nd.lr[ir]) / (nd.lr[ir + 1] - nd.lr[ir]);
      var v = (1 - fg) * (1 - fr) * nd.ls[ig][ir] + fg * (1 - fr) * nd.ls[ig + 1][ir]
        + (1 - fg) * fr * nd.ls[ig][ir + 1] + fg * fr * nd.ls[ig + 1][ir + 1];
      return Math.exp(v + (xg - cg) + (xr - cr));
    }

    // roofline.step.tile_rows_table: Σ_i h·E[ceil(r_i / h)], r_i ~ Binomial(T, q_i); the binomial's
    // terms over mean +- 8 sd (+8) by the ratio of neighbours from the mode, normalised
    var TILE_TABLES = {};
    function tileRowsTable(experts, topK, skew) {
      var key = experts + "/" + topK + "/" + skew;
      if (TILE_TABLES[key]) return TILE_TABLES[key];
      // experts of equal probability computed once (numpy.unique's sorted values and counts)
      var sorted = Array.prototype.slice.call(routingProbabilities(experts, topK, skew)).sort(function (a, b) { return a - b; });
      var probs = [], counts = [];
      sorted.forEach(function (x) {
        if (probs.length && probs[probs.length - 1] === x) counts[counts.length - 1] += 1;
        else { probs.push(x); counts.push(1); }
      });
      var grid = tileGrid(experts, topK), values = new Float64Array(grid.length);
      for (var g = 0; g < grid.length; g++) {
        var n = grid[g], h = n * topK < SMALL_TILE_ROWS_PER_EXPERT * experts ? SMALL_TILE[0] : LARGE_TILE[0], total = 0.0;
        for (var i = 0; i < probs.length; i++) {
          var qi = probs[i], count = counts[i];
          if (qi >= 1.0) { total += count * Math.ceil(n / h); continue; }
          var mean = n * qi, sd = Math.sqrt(n * qi * (1.0 - qi));
          var lo = Math.max(0, Math.trunc(mean - 8.0 * sd) - 8), hi = Math.min(n, Math.trunc(mean + 8.0 * sd) + 8);
          if (hi < h) { total += count * -Math.expm1(n * Math.log1p(-qi)); continue; }
          var mode = Math.min(n, Math.floor((n + 1) * qi)), odds = qi / (1.0 - qi);
          var w = new Float64Array(hi - lo + 1), r, sum = 0.0, ex = 0.0;
          w[mode - lo] = 1.0;
          for (r = mode; r < hi; r++) w[r + 1 - lo] = w[r - lo] * (n - r) / (r + 1) * odds;
          for (r = mode; r > lo; r--) w[r - 1 - lo] = w[r - lo] * r / (n - r + 1) / odds;
          for (r = lo; r <= hi; r++) { sum += w[r - lo]; ex += w[r - lo] * Math.ceil(r / h); }
          total += count * ex / sum;
        }
        values[g] = h * total;
      }
      TILE_TABLES[key] = { grid: grid, values: values };
      return TILE_TABLES[key];
    }

    // roofline.index_kernels.moe_index_ops
    function moeIndexOps(model, tp) {
      if (!model.moe_layers) return [];
      var hidden = model.hidden_size;
      var ops = [["select-1d-long", 1.0], ["gather", hidden]];
      if (model.expert_bias) ops.push(["gather-weights", 2.0 * model.moe_intermediate_size / tp], ["gather-weights", hidden]);
      return ops.concat([["select-1d", 1.0], ["index-add", hidden]]);
    }

    // roofline.index_kernels._lerp and _interp_log
    function lerpNested(a, b, f) {
      return Array.isArray(a) ? a.map(function (x, i) { return lerpNested(x, b[i], f); }) : a + f * (b - a);
    }
    function interpLog(nodes, values, x) {
      var n = nodes.length;
      if (x <= nodes[0]) return values[0];
      if (x >= nodes[n - 1]) return values[n - 1];
      var j = 1;
      while (nodes[j] < x) j++;
      var f = (Math.log(x) - Math.log(nodes[j - 1])) / (Math.log(nodes[j]) - Math.log(nodes[j - 1]));
      return lerpNested(values[j - 1], values[j], f);
    }

    // roofline.index_kernels.layer_excess_s
    function layerIndexExcess(table, ops, repeat) {
      var out = [], r;
      for (r = 0; r <= SMALL_INDEX_MAX_ROWS; r++) out.push(0.0);
      ops.forEach(function (o) {
        var e = table.ops[o[0]];
        var small = interpLog(e.widths, interpLog(e.repeats, e.small_s, repeat), o[1]);
        var large = interpLog(e.widths, interpLog(e.repeats, e.large_s, repeat), o[1]);
        for (r = 1; r <= SMALL_INDEX_MAX_ROWS; r++) out[r] = out[r] + (small[r - 1] - large);
      });
      return out;
    }

    // roofline.index_kernels.excess_at (the float path)
    function indexExcessAt(excess, rows) {
      if (rows <= 0.0 || rows > SMALL_INDEX_MAX_ROWS) return 0.0;
      var i = Math.min(Math.floor(rows), SMALL_INDEX_MAX_ROWS - 1);
      return excess[i] + (rows - i) * (excess[i + 1] - excess[i]);
    }

    // roofline.step.head_dim_rate: linear in log head width between the measured ones, clamped
    function headDimRate(rates, headDim) {
      if (!rates) return null;
      var pts = Object.keys(rates).map(function (k) { return [Number(k), Number(rates[k])]; });
      if (!pts.length) return null;
      pts.sort(function (a, b) { return a[0] - b[0]; });
      if (headDim <= pts[0][0]) return pts[0][1];
      if (headDim >= pts[pts.length - 1][0]) return pts[pts.length - 1][1];
      for (var i = 1; i < pts.length; i++) {
        if (headDim <= pts[i][0]) {
          var f = Math.log(headDim / pts[i - 1][0]) / Math.log(pts[i][0] / pts[i - 1][0]);
          return pts[i - 1][1] + f * (pts[i][1] - pts[i - 1][1]);
        }
      }
      return pts[pts.length - 1][1];
    }

    // roofline.scenario.make_scenario + roofline.step.StepModel (its derived scalars and _c)
    function scenario(s) {
      var card = CARDS[s.card], model = MODELS[s.model];
      if (!card) throw new Error("unknown card " + s.card);
      if (!model) throw new Error("unknown model " + s.model);
      var tp = Number(s.tp === undefined ? 1 : s.tp), skew = Number(s.routing_skew || 0);
      if (!(Number.isInteger(tp) && tp >= 1 && tp <= DATA.max_tp)) throw new Error("tp: a whole number of GPUs from 1 to " + DATA.max_tp);
      if (!(skew >= 0 && skew <= 8)) throw new Error("routing skew: a number from 0 to 8");
      // roofline.scenario.resolve_calibration: a transferred calibration depends on the weight format
      var fitted = s.calibrated !== false && ((card.fitted_formats || {})[s.weight_dtype] || card.fitted);
      var cal = fitted ? fitted : DATA.pure;
      var kvCache = !s.kv_cache || s.kv_cache === "auto" ? cal.kv_cache : s.kv_cache;
      var wd = s.weight_dtype, kd = s.kv_dtype, actB = dtypeBytes(DATA.act_dtype);
      if (model.decode_weight_bytes[wd] === undefined) throw new Error("unknown dtype '" + wd + "'");
      var moe = model.moe_layers > 0;
      var m = {
        card: card, model: model, cal: cal, calibrated: !!fitted, calCard: fitted ? cal.card : card.id, kvCache: kvCache,
        logits: s.logits || "last", tp: tp, skew: skew,
        prompt: Number(s.prompt_tokens), gen: Number(s.gen_tokens), weightDtype: wd, kvDtype: kd,
      };
      var weightRead = model.decode_weight_bytes[wd];
      var allExperts = moe ? model.all_routed_expert_bytes[wd] : 0.0;
      m.weightRead = weightRead / tp;                                    // weight_read_bytes
      m.denseRead = (weightRead - allExperts) / tp;                      // dense_read_bytes
      m.expertBytes = moe ? model.routed_expert_bytes[wd] / tp : 0.0;    // expert_bytes
      m.weightResident = model.weight_bytes[wd] / tp;                    // roofline.memory: weights per GPU
      // the attention layout, one GPU's share
      var kvB = dtypeBytes(kd);
      var fullKv = 0.0, winKv = 0.0, fullFlop = 0.0, winFlop = 0.0, fullScores = 0.0, winScores = 0.0;
      var fullLane = 0.0, winLane = 0.0, fullRead = 0.0, winRead = 0.0, windows = [];
      var fullHeads = 0.0, winHeads = 0.0;  // query heads x layers: a prefill's score elements per pair
      var fullPflop = 0.0, winPflop = 0.0;  // a prompt's pair (MLA: decompressed)
      model.attention_groups.forEach(function (g) {
        if (g.window !== null && windows.indexOf(g.window) < 0) windows.push(g.window);
      });
      if (windows.length > 1) {
        throw new Error(model.name + ": layers with several window sizes ([" + windows.sort(function (a, b) { return a - b; }).join(", ")
                        + "]) are not supported");
      }
      model.attention_groups.forEach(function (g) {
        var kvShare = g.kv_elements_per_token * kvHeadsShare(g.kind, g.kv_heads, tp);
        var kv = g.layers * kvShare * kvB;
        var flop = g.layers * g.flop_per_pair / tp;
        var pflop = g.layers * (g.prefill_flop_per_pair || g.flop_per_pair) / tp;
        var heads = g.layers * g.q_heads / tp;
        var scores = heads;
        if (g.sinks && cal.attention_score_bytes > 0) scores *= 1.0 + cal.sink_score_bytes / cal.attention_score_bytes;
        var read = kv * (g.kind === "mla" ? cal.mla_latent_passes : 1.0);
        var lane = g.layers;
        if (g.window === null) {
          fullKv = fullKv + kv; fullFlop = fullFlop + flop; fullScores = fullScores + scores;
          fullLane = fullLane + lane; fullRead = fullRead + read; fullHeads = fullHeads + heads;
          fullPflop = fullPflop + pflop;
        } else {
          winKv = winKv + kv; winFlop = winFlop + flop; winScores = winScores + scores;
          winLane = winLane + lane; winRead = winRead + read; winHeads = winHeads + heads;
          winPflop = winPflop + pflop;
        }
      });
      m.window = windows.length ? windows[0] : null;
      m.attnFlopPerPair = fullFlop;
      m.attnWindowFlopPerPair = winFlop;
      m.prefillFlopPerPair = fullPflop;
      m.prefillWindowFlopPerPair = winPflop;
      m.kvb = fullKv + winKv;            // kv_bytes_per_token
      m.kvWindowB = winKv;               // kv_window_bytes_per_token
      // roofline.step: the prefill-kernels probe's bytes per element of each kind (at the bandwidth
      // ceiling), x the model's elements per token (without the clamped activation's: silu's)
      var perElement = cal.prefill_elementwise_bytes_per_element || null;
      // roofline.step.plain_mlp_activation_weight: a plain MLP's intermediate element per a gated one's
      var plainWeight = DATA.plain_mlp_activation_weight;
      if (perElement && perElement.gated_intermediate > 0 && perElement.plain_intermediate > 0) {
        plainWeight = perElement.plain_intermediate / perElement.gated_intermediate;
      }
      var widthBytes = (model.act_width_bytes_per_token
                        - (1.0 - plainWeight) * (model.plain_intermediate_bytes_per_token || 0.0)) / tp;
      m.actBpt = cal.activation_traffic_coeff * widthBytes;
      m.preActBpt = cal.prefill_activation_traffic_coeff * widthBytes;
      m.preElS = 0.0;
      m.decElExtraS = 0.0;  // StepModel.decode_elementwise_extra_s_per_token
      if (perElement) {
        var elements = model.prefill_elementwise_elements;
        Object.keys(elements).forEach(function (k) {
          var cost = perElement[k];
          if (cost === undefined && k === "clamped_intermediate") cost = perElement.gated_intermediate;
          // an expert bias: gathered per routed row and added, two one-pass kernels
          if (cost === undefined && k === "expert_bias") cost = 2.0 * (perElement.plain_intermediate || 0.0);
          // no MLA shapes probed: an MLA layer as the MHA layer its prefill decompresses to
          if (cost === undefined && k === "mla_heads") cost = (perElement.query || 0.0) + (perElement.key_value || 0.0);
          // a tensor-parallel GPU holds its share of the heads and intermediate, the whole hidden state
          m.preElS = m.preElS + (cost || 0.0) * elements[k] / (k === "hidden" ? 1 : tp);
        });
        m.preElS = m.preElS / (cal.measured_bandwidth_bytes_per_s || card.bandwidth_bytes_per_s);
        // a decode step's routed rows: gpt-oss's clamped SwiGLU over silu's, and its experts' biases
        var clamped = perElement.clamped_intermediate === undefined ? (perElement.gated_intermediate || 0.0)
          : perElement.clamped_intermediate;
        var bias = perElement.expert_bias === undefined ? 2.0 * (perElement.plain_intermediate || 0.0)
          : perElement.expert_bias;
        m.decElExtraS = (Math.max(clamped - (perElement.gated_intermediate || 0.0), 0.0) * elements.clamped_intermediate
                         + bias * elements.expert_bias) / tp
                        / (cal.measured_bandwidth_bytes_per_s || card.bandwidth_bytes_per_s);
      }
      m.bw = cal.measured_bandwidth_bytes_per_s || card.bandwidth_bytes_per_s;
      // roofline.hardware.matmul_peak: the weight format's tensor path, scaled to a measured bf16 ceiling
      m.peak = card.matmul_peak_flop_per_s[wd];
      if (cal.measured_peak_flop_per_s) m.peak = m.peak * cal.measured_peak_flop_per_s / card.peak_flop_per_s;
      m.balance = m.peak / m.bw;
      // StepModel._context_windows: the windows measured at this head width and group (none for MLA)
      var mla = model.attention_groups.some(function (g) { return g.kind === "mla"; });
      var group = model.heads_per_kv_head;
      m.contextWindows = mla ? [] : (cal.attention_context_factors || []).filter(function (w) {
        return w[3] <= model.head_dim && model.head_dim <= w[4] && w[5] <= group && group <= w[6];
      });
      // StepModel._row_factors: the scores' cost by the softmax kernel a row's length runs
      // (attention_score_row_factors), each step a window of lengths up to the next step
      m.rowFactors = mla ? [] : (cal.attention_score_row_factors || []).map(function (s, i, all) {
        return [s[0], i + 1 < all.length ? all[i + 1][0] : Infinity, s[1]];
      });
      // StepModel._softmax_extra_positions: a sink logit joins each decoding sequence's softmax row
      m.softmaxExtra = model.sinks && !mla ? 1.0 : 0.0;
      // StepModel._kernel_table: the decode attention's measured factor by batched matrices and cache
      // length (attention_kernel_table), the entry of this head width nearest in query heads a KV head
      // (within 2x; not MLA), a column of ones at half its fewest matrices, and the price's steps by length
      m.kernelTable = null;
      var near = mla || model.moe_layers ? [] : (cal.attention_kernel_table || []).filter(function (e) {
        return e.head_dim === model.head_dim && Math.max(e.group / group, group / e.group) <= 2.0;
      });
      if (near.length) {
        var best = near[0];
        near.forEach(function (e) {
          var a = Math.abs(Math.log(e.group / group)), b = Math.abs(Math.log(best.group / group));
          if (a < b || (a === b && e.group < best.group)) best = e;
        });
        var edges = [];
        // a slower kernel's window measured at this head width, whatever its query heads a KV head
        (cal.attention_context_factors || []).forEach(function (w) {
          if (w[3] <= model.head_dim && model.head_dim <= w[4]) edges.push(w[0], w[1]);
        });
        m.rowFactors.forEach(function (r) { if (r[0] > 0) edges.push(r[0]); });
        edges = edges.filter(function (e, i) { return edges.indexOf(e) === i; }).sort(function (a, b) { return a - b; });
        var lm = best.matrices.map(function (x) { return Math.log2(x); });
        m.kernelTable = {
          lm: [lm[0] - 1.0].concat(lm), cs: best.contexts,
          F: [best.contexts.map(function () { return 1.0; })].concat(best.factors), edges: edges,
          kvHeads: model.num_key_value_heads * kvHeadsShare("gqa", model.num_key_value_heads, tp),
        };
      }
      m.overhead = cal.step_overhead_s + cal.layer_overhead_s * model.num_hidden_layers
        + cal.moe_layer_overhead_s * model.moe_layers;                   // decode_overhead_s
      // a layer's q/k norms (gpt-oss's MoE layer): a fixed time each such layer (layer_feature_overhead_s)
      var features = cal.layer_feature_overhead_s || {};
      var layerFeatures = model.decode_layer_features || {};
      Object.keys(layerFeatures).forEach(function (k) {
        m.overhead = m.overhead + (features[k] || 0.0) * layerFeatures[k];
      });
      var sPerByte = 1.0 / (cal.bandwidth_efficiency * m.bw);
      var sPerDecodeFlop = 1.0 / (cal.compute_efficiency * m.peak);
      var sPerAttentionFlop = 1.0 / (cal.attention_efficiency * m.peak);
      var sPerPrefillFlop = 1.0 / (cal.prefill_compute_efficiency * m.peak);
      // roofline.step.head_dim_rate: a prompt's attention pairs at the engine's measured rate for this head width
      var pairRate = headDimRate(cal.prefill_attention_flop_per_s, model.head_dim);
      var sPerPrefillPairFlop = pairRate === null ? sPerPrefillFlop : 1.0 / pairRate;
      // StepModel.masked_prefill: the engine's masked prefill path (windows past the prompt, sinks)
      var sinks = model.attention_groups.some(function (g) { return g.sinks; });
      var mla = model.attention_groups.some(function (g) { return g.kind === "mla"; });
      m.maskedPrefill = null;
      if (cal.masked_prefill_attention_flop_per_s && (sinks || windows.length) && !mla) {
        var computed = sinks ? Math.ceil((model.head_dim + 1) / 8) * 8 : model.head_dim;
        var maskedRate = headDimRate(cal.masked_prefill_attention_flop_per_s, computed);
        m.maskedPrefill = [computed / model.head_dim / (maskedRate * sPerPrefillPairFlop), sinks];
      }
      var scoreS = cal.attention_score_bytes * sPerByte;
      var prefillScoreS = (cal.prefill_score_bytes || 0.0) * sPerByte;
      var expertRowFlop = moe ? model.expert_row_flop / tp : 0.0;
      // roofline.step: a prompt token's routed-expert FLOPs at the grouped GEMMs' measured rate
      var routedFlop = moe ? model.routed_flop_per_token : 0.0;
      var sPerExpertPrefillFlop = cal.expert_prefill_flop_per_s ? 1.0 / cal.expert_prefill_flop_per_s : sPerPrefillFlop;
      // roofline.step: the grouped GEMM's tiles (expert_small_tile_efficiency), seconds per row of tiles
      var tiles = !!(cal.expert_small_tile_efficiency && moe);
      var smallRowS = 0.0, largeRowS = 0.0, decodeRoutedS = 0.0, prefillRoutedS = routedFlop / tp * sPerExpertPrefillFlop;
      if (tiles) {
        var inter = model.moe_intermediate_size / tp, hidden = model.hidden_size;
        var paddedRowFlop = function (cols) {
          return model.moe_layers * 2.0 * (hidden * Math.ceil(2.0 * inter / cols) * cols + inter * Math.ceil(hidden / cols) * cols);
        };
        smallRowS = paddedRowFlop(SMALL_TILE[1]) / (cal.expert_small_tile_efficiency * m.peak);
        largeRowS = paddedRowFlop(LARGE_TILE[1]) / (cal.expert_large_tile_efficiency * m.peak);
      }
      if (tiles || (cal.expert_gemm_table && moe)) { // priced apart (passParts): out of the dense terms
        decodeRoutedS = routedFlop / tp * sPerDecodeFlop;
        prefillRoutedS = 0.0;
      }
      var reduceFixed = 0.0, reducePerToken = 0.0, gatherPerRow = 0.0;
      if (tp > 1) { // StepModel.link_bytes_per_s, link_latency_s
        var link = cal.allreduce_bandwidth_bytes_per_s || card.tp_link_bytes_per_s[String(tp)];
        if (!link) throw new Error(card.id + " has no interconnect on record: tensor parallelism cannot be costed");
        var latency = cal.allreduce_latency_s !== null && cal.allreduce_latency_s !== undefined ? cal.allreduce_latency_s
          : (card.allreduce_latency_s || 0.0);
        var linkS = 1.0 / link, nReduce = 2.0 * model.num_hidden_layers + 1.0;
        var gatherLatency = cal.allgather_latency_s === null || cal.allgather_latency_s === undefined ? latency : cal.allgather_latency_s;
        reduceFixed = nReduce * latency + gatherLatency;
        reducePerToken = nReduce * model.hidden_size * actB * 2.0 * (tp - 1) / tp * linkS;
        gatherPerRow = model.vocab_size * actB * (tp - 1) / tp * linkS;
      }
      // StepModel._prefill_fitted_s: the prefill matmuls at the fitted efficiency (what a load curve stretches)
      m.prefillFitted = [(model.body_linear_flop_per_token - routedFlop) * sPerPrefillFlop / tp,
                         model.lm_head_flop_per_position * sPerPrefillFlop / tp];
      m.loadCurve = cal.matmul_load_curve || null;
      // StepModel: the softmax's warp kernel walks its row serially (attention_softmax_warp_s_per_token;
      // MLA's latent scores too)
      var warpRowS = cal.attention_softmax_warp_s_per_token || 0.0;
      // StepModel: the decode attention's fill and drain beyond its price (attention_ramp_s), every attention layer
      var rampLayers = 0;
      model.attention_groups.forEach(function (g) { rampLayers = rampLayers + g.layers; });
      m.c = [
        cal.prefill_overhead_s,                                             // 0 prefill overhead
        Math.max(m.overhead, cal.prefill_overhead_s),                       // 1 mixed-pass overhead
        m.denseRead * sPerByte,                                             // 2 matmul memory, dense weights
        model.linear_flop_per_token / tp * sPerDecodeFlop - decodeRoutedS,  // 3 per decode token
        (model.body_linear_flop_per_token - routedFlop) / tp * sPerPrefillFlop
          + prefillRoutedS,                                                 // 4 per prompt token
        model.lm_head_flop_per_position / tp * sPerPrefillFlop,             // 5 per prefill logit row
        fullRead * sPerByte,                                                // 6 per KV token moved, full layers
        cal.kv_traffic_factor,                                              // 7 KV moved per KV read
        fullFlop * sPerAttentionFlop,                                       // 8 per decode pair, full layers
        fullPflop * sPerPrefillPairFlop,                                    // 9 per prefill pair, full layers
        m.actBpt * sPerByte + m.decElExtraS,                                // 10 per decode token
        m.preActBpt * sPerByte + m.preElS,                                  // 11 per prompt token
        cal.roofline_exponent,                                              // 12 p
        cal.overhead_exponent,                                              // 13 q
        winRead * sPerByte,                                                 // 14 per KV token moved, windowed
        winFlop * sPerAttentionFlop,                                        // 15 per decode pair, windowed
        winPflop * sPerPrefillPairFlop,                                     // 16 per prefill pair, windowed
        fullScores * scoreS,                                                // 17 score traffic per pair, full
        winScores * scoreS,                                                 // 18 score traffic per pair, windowed
        cal.attention_sequence_overhead_s * model.num_hidden_layers,        // 19 per decoding sequence
        model.moe_layers * m.expertBytes * cal.expert_traffic_factor * sPerByte, // 20 per touched expert
        model.num_experts,                                                  // 21 E
        model.num_experts ? 1.0 - model.experts_per_token / model.num_experts : 1.0, // 22 1 - k/E
        reduceFixed,                                                        // 23 collectives, fixed
        reducePerToken,                                                     // 24 per token in the pass
        gatherPerRow,                                                       // 25 per logit row gathered
        cal.attention_lane_s_per_token * fullLane,                          // 26 lane, full layers
        cal.attention_lane_s_per_token * winLane,                           // 27 lane, windowed layers
        cal.batch_layer_overhead_s * model.num_hidden_layers,               // 28 from two sequences up
        expertRowFlop * sPerDecodeFlop,                                     // 29 per padded expert row
        cal.expert_gemm_min_rows,                                           // 30 rows per touched expert
        model.experts_per_token,                                            // 31 k
        fullHeads * prefillScoreS,                                          // 32 prefill score traffic per pair, full
        winHeads * prefillScoreS,                                           // 33 prefill score traffic per pair, windowed
        model.moe_layers * model.experts_per_token * model.hidden_size * actB
          * (cal.expert_row_traffic_coeff || 0.0) * sPerByte,               // 34 routed rows' gather and combine, per token
        smallRowS,                                                          // 35 per row of small tiles (0: no tiles)
        largeRowS,                                                          // 36 per row of large tiles
        SMALL_TILE_ROWS_PER_EXPERT * model.num_experts,                     // 37 routed rows below which tiles are small
        warpRowS * fullLane,                                                // 38 softmax warp floor per position, full layers
        warpRowS * winLane,                                                 // 39 softmax warp floor per position, windowed
        cal.attention_softmax_warp_max_tokens === undefined ? 2048.0
          : cal.attention_softmax_warp_max_tokens,                          // 40 longest row the warp kernel takes
        cal.attention_softmax_warp_after_tokens || 0.0,                     // 41 positions the floor starts after
        rampLayers * (cal.attention_ramp_s || 0.0),                         // 42 attention ramp's height, all its layers
        rampLayers,                                                         // 43 the layers it applies to
        cal.attention_ramp_knee_s === undefined ? 1e-5 : cal.attention_ramp_knee_s,  // 44 its knee
      ];
      m.table = skew > 0 && model.num_experts ? touchedTable(model.num_experts, model.experts_per_token, skew) : null;
      m.tileTable = tiles ? tileRowsTable(model.num_experts, model.experts_per_token, skew) : null;
      // StepModel._expert_nodes: the grouped-mm probe's table at this model's experts
      m.expertNodes = cal.expert_gemm_table && moe
        ? layerNodes(cal.expert_gemm_table, model.hidden_size, model.moe_intermediate_size / tp) : null;
      // StepModel._index_excess: the small-index kernels' seconds over the large-index ones, 0-16 routed rows
      m.indexExcess = cal.index_kernel_table && moe
        ? layerIndexExcess(cal.index_kernel_table, moeIndexOps(model, tp), model.experts_per_token).map(function (x) {
          return model.moe_layers * x; }) : null;
      return m;
    }

    // StepModel.experts_touched
    function expertsTouched(m, tokens) {
      var c = m.c;
      if (!c[21]) return 0.0;
      if (!m.table) return c[21] * (1.0 - Math.pow(c[22], tokens));
      var t = m.table;
      return interp(tokens, t.grid, function (j) { return t.values[j]; });
    }

    // StepModel.expert_tile_rows
    function expertTileRows(m, tokens) {
      if (!m.tileTable) return 0.0;
      var t = m.tileTable, last = t.grid[t.grid.length - 1];
      return interp(tokens, t.grid, function (j) { return t.values[j]; }) + Math.max(tokens - last, 0.0) * m.c[31];
    }

    // roofline.step.PassWork, decode_work, prefill_work (kvw, pairsw null: no window cap)
    function work(d, kv, p, pairs, rows, kvw, pairsw) {
      return { d: d || 0.0, kv: kv || 0.0, p: p || 0.0, pairs: pairs || 0.0, rows: rows || 0.0,
               kvw: kvw === undefined ? null : kvw, pairsw: pairsw === undefined ? null : pairsw };
    }
    function decodeWork(batch, kvRead, kvReadWindow) { return work(batch, kvRead, 0, 0, 0, kvReadWindow, null); }
    function prefillWork(tokens, pairs, rows, windowPairs) { return work(0, 0, tokens, pairs, rows, null, windowPairs); }

    // StepModel.overhead_s
    function overheadS(m, d, p) {
      var decode = m.overhead + (d >= 2.0 ? m.c[28] : 0.0);
      if (p > 0.0) return d > 0.0 ? Math.max(decode, m.c[0]) : m.c[0];
      return decode;
    }

    function perSequence(total, sequences) { return sequences > 0.0 ? total / sequences : 0.0; }

    // roofline.step._warp_floor: (tokens - after) x s where a row of tokens runs the softmax's warp kernel
    function warpFloor(tokens, s, most, after) { return tokens > after && tokens <= most ? (tokens - after) * s : 0.0; }

    // roofline.step._window_factor: the factor of the window a cache of kv / d positions falls in
    function windowFactor(windows, kv, d) {
      if (d > 0.0) {
        var t = kv / d;
        for (var i = 0; i < windows.length; i++) {
          var win = windows[i];
          if (t > win[0] && t <= win[1]) return win[2];
        }
      }
      return 1.0;
    }

    // bisect.bisect_right(a, x)
    function bisectRight(a, x) {
      var lo = 0, hi = a.length;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (x < a[mid]) hi = mid; else lo = mid + 1; }
      return lo;
    }

    // roofline.step._table_factor: the kernel table's factor at `matrices` batched matrices and caches of
    // `tokens` positions (linear in log2 matrices and length, ends held, never across a step of the price)
    function tableFactor(T, matrices, tokens) {
      var lm = T.lm, cs = T.cs, F = T.F;
      var x = Math.min(Math.max(matrices > 1.0 ? Math.log2(matrices) : 0.0, lm[0]), lm[lm.length - 1]);
      var t = Math.min(Math.max(tokens, cs[0]), cs[cs.length - 1]);
      var i = Math.min(Math.max(bisectRight(lm, x) - 1, 0), lm.length - 2);
      var j = Math.min(Math.max(bisectRight(cs, t) - 1, 0), cs.length - 2);
      var wi = (x - lm[i]) / (lm[i + 1] - lm[i]);
      var wj = (t - cs[j]) / (cs[j + 1] - cs[j]);
      T.edges.forEach(function (e) { if (cs[j] <= e && e < cs[j + 1]) wj = t <= e ? 0.0 : 1.0; });
      var lo = F[i][j] * (1.0 - wj) + F[i][j + 1] * wj;
      var hi = F[i + 1][j] * (1.0 - wj) + F[i + 1][j + 1] * wj;
      return lo * (1.0 - wi) + hi * wi;
    }

    // StepModel._parts: [overhead, matmul memory, matmul compute, attention memory, attention compute,
    // elementwise, collectives]
    function passParts(m, w) {
      var c = m.c, d = w.d, kv = w.kv, p = w.p, pairs = w.pairs, rows = w.rows;
      var kvw = w.kvw === null ? kv : w.kvw, pairsw = w.pairsw === null ? pairs : w.pairsw;
      var score = c[17], scorew = c[18];
      var tokens = kv, tokensW = kvw;  // the cached tokens read, before a window's factor scales them
      var warp = 0.0, warpw = 0.0;
      // the softmax's rows: each sequence's cache, and its sink where the model has one
      var rk = kv + d * m.softmaxExtra, rkw = kvw + d * m.softmaxExtra;
      if (c[38] || c[39]) { // StepModel._parts: the softmax's warp kernel's floor, its walk along the row
        warp = warpFloor(perSequence(rk, d), c[38], c[40], c[41]);
        warpw = warpFloor(perSequence(rkw, d), c[39], c[40], c[41]);
      }
      if (m.rowFactors.length) { // StepModel._parts: the scores' row-length windows
        var lf = windowFactor(m.rowFactors, rk, d);
        score = score * lf;
        scorew = scorew * (w.kvw === null ? lf : windowFactor(m.rowFactors, rkw, d));
      }
      // StepModel._context_factor: a cache length in a slower kernel's window (attention_context_factors)
      if (m.contextWindows.length) {
        var f = windowFactor(m.contextWindows, kv, d);
        kvw = kvw * (w.kvw === null ? f : windowFactor(m.contextWindows, kvw, d));
        kv = kv * f;
      }
      var matmulMemory = c[2];
      var matmulCompute = d * c[3] + p * c[4] + rows * c[5];
      var expertMemory = 0.0, expertCompute = 0.0;
      if (c[21]) {
        var touched = expertsTouched(m, d + p);
        if (c[35]) { // by tiles: the experts' bytes against their tiles' FLOPs, beside the dense matmuls
          expertMemory = c[20] * touched;
          expertCompute = expertTileRows(m, d + p) * ((d + p) * c[31] < c[37] ? c[35] : c[36]);
        } else if (!m.expertNodes) {
          matmulMemory = matmulMemory + c[20] * touched;
          if (c[30]) matmulCompute = matmulCompute + Math.max(c[30] * touched - (d + p) * c[31], 0.0 * touched) * c[29];
        }
        if (m.expertNodes) { // StepModel._measured_experts: as the grouped-mm probe measured them
          var tok = d + p, rowsEach = tok * c[31] / Math.max(touched, 1.0);
          var tExp = m.model.moe_layers * nodesSeconds(m.expertNodes, touched, rowsEach);
          if (c[35]) {
            var wt = Math.min(Math.max(Math.log(Math.max(rowsEach, 1.0) / TABLE_ROWS_UP_TO)
                                       / Math.log(TILE_ROWS_FROM / TABLE_ROWS_UP_TO), 0.0), 1.0);
            var tTiles = Math.max(expertMemory, expertCompute);
            if (wt > 0.0) tExp = Math.exp((1.0 - wt) * Math.log(Math.max(tExp, 1e-30)) + wt * Math.log(Math.max(tTiles, 1e-30)));
          }
          if (!(tok > 0.0)) tExp = 0.0;
          if (rowsEach < m.peak / m.bw) { expertMemory = tExp; expertCompute = 0.0; }
          else { expertMemory = 0.0; expertCompute = tExp; }
        }
      }
      var written = d + p;
      var kvS = (c[7] * kv + written) * c[6] + (c[7] * kvw + written) * c[14];
      if (c[26] || c[27]) {
        var lane = perSequence(kv, d) * c[26] + perSequence(kvw, d) * c[27];
        kvS = 0.5 * kvS + Math.max(0.5 * kvS, lane);
      }
      var decodeAttention = kvS + (c[38] || c[39] ? Math.max(kv * score, warp) + Math.max(kvw * scorew, warpw)
                                                  : kv * score + kvw * scorew) + d * c[19];
      if (c[42]) { // its fill and drain: a layer priced x seconds (not the prompt's KV writes) runs ramp x x / (x + knee) more
        var x = Math.max(decodeAttention - p * (c[6] + c[14]), 0.0) / c[43];
        decodeAttention = decodeAttention + c[42] * x / (x + c[44]);
      }
      if (m.kernelTable) { // as measured at its batched matrices and cache length (not the prompt's KV writes)
        var T = m.kernelTable;
        var kf = tableFactor(T, d * T.kvHeads, perSequence(tokens, d));
        if (w.kvw !== null) { // the windowed layers' rings: their own length's factor, by their share
          var fw = tableFactor(T, d * T.kvHeads, perSequence(tokensW, d));
          var full = c[7] * kv * c[6] + kv * score, win = c[7] * kvw * c[14] + kvw * scorew;
          kf = full + win > 0.0 ? (kf * full + fw * win) / (full + win) : kf;
        }
        var writtenS = p * (c[6] + c[14]);
        decodeAttention = writtenS + (decodeAttention - writtenS) * kf;
      }
      return [
        overheadS(m, d, p),
        matmulMemory,
        matmulCompute,
        decodeAttention + pairs * c[32] + pairsw * c[33],
        kv * c[8] + pairs * c[9] + kvw * c[15] + pairsw * c[16],
        d * c[10] + p * c[11] + (d + p) * c[34] + (m.indexExcess === null ? 0.0 : indexExcessAt(m.indexExcess, (d + p) * c[31])),
        c[23] === 0.0 && c[24] === 0.0 ? 0.0 : c[23] + written * c[24] + (d + rows) * c[25],
        expertMemory,
        expertCompute,
      ];
    }

    // StepModel.pass_s
    function passS(m, w) {
      var x = passParts(m, w), p = m.c[12];
      return pnorm(x[0], pnorm(x[1], x[2], p) + Math.max(x[7], x[8]) + pnorm(x[3], x[4], p) + x[5] + x[6], m.c[13]);
    }

    // StepModel.pass_breakdown: [total, overhead, memory, compute, collectives]
    function passBreakdown(m, w) {
      var x = passParts(m, w), p = m.c[12];
      var gemm = pnorm(x[1], x[2], p), attn = pnorm(x[3], x[4], p), experts = Math.max(x[7], x[8]);
      var total = pnorm(x[0], gemm + experts + attn + x[5] + x[6], m.c[13]);
      var gemmOnMemory = x[1] >= x[2], attnOnMemory = x[3] >= x[4], expertsOnMemory = x[7] >= x[8];
      var memory = (gemmOnMemory ? gemm : 0.0) + (attnOnMemory ? attn : 0.0) + (expertsOnMemory ? experts : 0.0)
        + x[5] + x[6];
      var compute = (gemmOnMemory ? 0.0 : gemm) + (attnOnMemory ? 0.0 : attn) + (expertsOnMemory ? 0.0 : experts);
      return [total, x[0], memory, compute, x[6]];
    }

    // StepModel.linear_flop, attention_flop, weight_bytes_read, bytes_counted
    function linearFlop(m, w) {
      var model = m.model;
      return (w.d * model.linear_flop_per_token + w.p * model.body_linear_flop_per_token
              + w.rows * model.lm_head_flop_per_position) / m.tp;
    }
    function attentionFlop(m, w) {
      var kvw = w.kvw === null ? w.kv : w.kvw, pairsw = w.pairsw === null ? w.pairs : w.pairsw;
      return w.kv * m.attnFlopPerPair + w.pairs * m.prefillFlopPerPair + kvw * m.attnWindowFlopPerPair
        + pairsw * m.prefillWindowFlopPerPair;
    }
    function weightBytesRead(m, w) {
      return m.denseRead + m.model.moe_layers * m.expertBytes * expertsTouched(m, w.d + w.p);
    }
    function bytesCounted(m, w) {
      var kvw = w.kvw === null ? w.kv : w.kvw, full = m.kvb - m.kvWindowB;
      return weightBytesRead(m, w) + (w.kv + w.p) * full + (kvw + w.p) * m.kvWindowB;
    }

    // roofline.decode.decode_step for one (batch, context): [total, overhead, memory, compute,
    // collectives, counted, linear, attention]
    function decodeStepWork(m, batch, context) {
      return decodeWork(batch, batch * context, m.window === null ? null : batch * Math.min(context, m.window));
    }
    function decodeStep(m, batch, context) {
      var w = decodeStepWork(m, batch, context), t = passBreakdown(m, w);
      return [t[0], t[1], t[2], t[3], t[4], bytesCounted(m, w), linearFlop(m, w), attentionFlop(m, w)];
    }

    // roofline.decode.decode_contexts for one (prompt, gen)
    function contexts(m) {
      var steps = Math.max(m.gen - 1.0, 1.0), out = [];
      for (var k = 0; k < SAMPLES; k++) {
        var meanStep = (k + 0.5) * steps / SAMPLES + 0.5;
        out.push(m.kvCache === "static" ? m.prompt + m.gen : m.prompt + meanStep);
      }
      return out;
    }

    function argmax3(a, b, c) { // roofline.step.bound_index
      return a >= Math.max(b, c) ? 0 : (b >= c ? 1 : 2);
    }

    // roofline.decode.mean_decode for one batch
    function meanDecode(m, batch, ctx) {
      ctx = ctx || contexts(m);
      var acc = [0, 0, 0, 0, 0, 0, 0, 0], w = 1.0 / SAMPLES, meanCtx = 0;
      for (var k = 0; k < SAMPLES; k++) {
        var v = decodeStep(m, batch, ctx[k]);
        for (var i = 0; i < 8; i++) acc[i] += w * v[i];
        meanCtx += ctx[k] * w;
      }
      return {
        step_s: acc[0], overhead_s: acc[1], memory_s: acc[2], compute_s: acc[3], collectives_s: acc[4],
        bytes_counted: acc[5], linear_flop: acc[6], attention_flop: acc[7],
        bound_index: argmax3(acc[1], acc[2], acc[3]), mean_context_tokens: meanCtx,
      };
    }

    // roofline.decode.mean_tpot_s (bend's grid): mean_decode's step time alone
    function tpotOnly(m, batch, ctx) {
      var acc = 0, w = 1.0 / SAMPLES;
      for (var k = 0; k < SAMPLES; k++) acc += w * passS(m, decodeStepWork(m, batch, ctx[k]));
      return acc;
    }

    // roofline.step.causal_pairs
    function causalPairs(p, window) {
      var full = p * (p + 1.0) / 2.0;
      if (window === null || window === undefined) return full;
      return p <= window ? full : window * (window + 1.0) / 2.0 + (p - window) * window;
    }

    // roofline.prefill.logit_positions
    function logitPositions(batch, prompt, logits) {
      return logits === "last" ? batch : batch * prompt;
    }

    // roofline.prefill.static_prefill_work
    function staticPrefillWork(batch, prompt, logits, window, masked) {
      var pairs = batch * causalPairs(prompt);
      var windowed = window === null ? null : batch * causalPairs(prompt, window);
      if (masked) {
        if (masked[1]) {
          pairs = batch * prompt * (prompt + 1.0) * masked[0];
          windowed = window === null ? null : pairs;
        } else if (window !== null && prompt > window) {
          windowed = batch * prompt * prompt * masked[0];
        }
      }
      return prefillWork(batch * prompt, pairs, logitPositions(batch, prompt, logits), windowed);
    }

    // roofline.prefill.chunk_sequences
    function chunkSequences(m, batch, prompt) {
      var chunk = m.cal.prefill_chunk_tokens;
      if (chunk === null || chunk === undefined) return batch;
      return Math.min(batch, Math.max(1.0, Math.floor(chunk / prompt)));
    }

    // roofline.prefill.prefill: consecutive forwards of as many sequences as the chunk holds
    // roofline.prefill.load_average: the curve's average over the first ``t`` seconds of load (linear
    // between its points, its first value before the first, its last after the last)
    function loadAverage(curve, t) {
      if (!(t > 0.0)) return curve[0][1];
      var area = 0.0, prevT = 0.0, prevR = curve[0][1];
      for (var i = 0; i < curve.length; i++) {
        var ct = curve[i][0], cr = curve[i][1];
        if (ct <= prevT) { prevR = cr; continue; }
        if (t <= ct) {
          var r = prevR + (cr - prevR) * (t - prevT) / (ct - prevT);
          return (area + 0.5 * (prevR + r) * (t - prevT)) / t;
        }
        area += 0.5 * (prevR + cr) * (ct - prevT);
        prevT = ct; prevR = cr;
      }
      return (area + prevR * (t - prevT)) / t;
    }

    function prefillFittedS(m, w) { return w.p * m.prefillFitted[0] + w.rows * m.prefillFitted[1]; }

    function prefill(m, batch) {
      var prompt = m.prompt, per = chunkSequences(m, batch, prompt);
      var full = Math.floor(batch / per), rest = batch - full * per, hasTail = rest > 0;
      var w = staticPrefillWork(per, prompt, m.logits, m.window, m.maskedPrefill), h = passBreakdown(m, w);
      var tw = null, t = [0.0, 0.0, 0.0, 0.0, 0.0];
      if (hasTail) { tw = staticPrefillWork(rest, prompt, m.logits, m.window, m.maskedPrefill); t = passBreakdown(m, tw); }
      var out = { ttft_s: full * h[0] + t[0], overhead_s: full * h[1] + t[1], memory_s: full * h[2] + t[2],
                  compute_s: full * h[3] + t[3], collectives_s: full * h[4] + t[4] };
      if (m.loadCurve && m.loadCurve.length) {  // roofline.prefill.prefill: the fitted matmuls at the load's average
        var burst = Math.min(out.compute_s, full * prefillFittedS(m, w) + (hasTail ? prefillFittedS(m, tw) : 0.0));
        var other = out.ttft_s - burst, ttft = out.ttft_s;
        for (var k = 0; k < 3; k++) ttft = other + burst / loadAverage(m.loadCurve, ttft);
        out.compute_s += ttft - out.ttft_s;
        out.ttft_s = ttft;
      }
      out.bytes = full * bytesCounted(m, w) + (hasTail ? bytesCounted(m, tw) : 0.0) + batch * prompt * (m.preActBpt + m.preElS * m.cal.bandwidth_efficiency * m.bw);
      out.flop = full * (linearFlop(m, w) + attentionFlop(m, w)) + (hasTail ? linearFlop(m, tw) + attentionFlop(m, tw) : 0.0);
      out.forwards = full + (hasTail ? 1 : 0);
      out.bound_index = argmax3(out.overhead_s, out.memory_s, out.compute_s);
      return out;
    }

    // roofline.memory.kv_held_bytes
    function kvHeldBytes(m, sequences, context) {
      var full = m.kvb - m.kvWindowB, windowed = m.window === null ? context : Math.min(context, m.window);
      return sequences * (context * full + windowed * m.kvWindowB);
    }

    // roofline.memory.peak_memory (per GPU)
    function peakMemory(m, batch) {
      var cal = m.cal, model = m.model, prompt = m.prompt, gen = m.gen;
      var actBytes = dtypeBytes(DATA.act_dtype);
      var weights = m.weightResident;
      var kvFull = kvHeldBytes(m, batch, prompt + gen);
      var kvPrompt = m.kvCache === "static" ? kvFull : kvHeldBytes(m, batch, prompt);
      var forward = chunkSequences(m, batch, prompt);
      var actPrefill = cal.activation_coeff * forward * prompt * model.prefill_transient_width / m.tp * actBytes;
      var logitsPrefill = logitPositions(forward, prompt, m.logits) * model.logits_bytes_per_position;
      var logitsDecode = batch * model.logits_bytes_per_position * (cal.decode_logits_buffers || 1.0);
      // roofline.memory.decode_score_bytes: one layer's decode attention scores, as many buffers as the engine holds
      var scoreBuffers = cal.decode_score_buffers || 0.0;
      if (scoreBuffers && model.sinks && cal.sink_score_bytes > 0) scoreBuffers += 1.0;
      var slots = (m.kvb - m.kvWindowB > 0 || m.window === null) ? prompt + gen : Math.min(prompt + gen, m.window);
      var scoresDecode = scoreBuffers * batch * (model.num_attention_heads / m.tp) * slots * actBytes;
      var atPrefill = kvPrompt + actPrefill + logitsPrefill;
      var atEnd = kvFull + logitsDecode + scoresDecode;
      var prefillWins = atPrefill >= atEnd;
      var kv = prefillWins ? kvPrompt : kvFull;
      var act = prefillWins ? actPrefill : scoresDecode;
      var logitsB = prefillWins ? logitsPrefill : logitsDecode;
      return { peak_bytes: weights + kv + act + logitsB + cal.workspace_bytes, weights_bytes: weights,
               kv_bytes: kv, activations_bytes: act, logits_bytes: logitsB, workspace_bytes: cal.workspace_bytes,
               peak_at: prefillWins ? "prefill" : "end" };
    }

    // ---- roofline.confidence ----
    // expected_errors: {tpot_fraction(batch), ttft_fraction(batch), peak_mem_fraction, basis}; null: not measured
    function expectedErrors(m) {
      if (!m.calibrated) {
        var f = DATA.floor;
        return { tpot: function () { return f.tpot_fraction; }, ttft: function () { return f.ttft_fraction; },
                 peak_mem_fraction: f.peak_mem_fraction, basis: f.basis };
      }
      var rep = m.cal.fit_report || {};
      if (rep.transferred) {  // roofline.confidence._transferred_errors: the engine profile's LOCO error
        var terr = rep.transferred.error || {}, tTpot = terr.tpot_mape_fraction, tTtft = terr.ttft_mape_fraction;
        var tpotT = tTpot === undefined || tTpot === null ? NaN : tTpot;
        var ttftT = tTtft === undefined || tTtft === null ? NaN : tTtft;
        var tBasis = "transferred from the " + rep.transferred.engine + " profile (" + rep.transferred.variant
          + "), leave-one-card-out error " + (isNaN(tpotT) ? "?" : (100 * tpotT).toFixed(0) + "%") + " ("
          + (terr.basis || "leave-one-card-out") + ", " + (terr.points || 0) + " points; roofline.engines)";
        return { tpot: function () { return tpotT; }, ttft: function () { return ttftT; },
                 peak_mem_fraction: null, basis: tBasis };
      }
      var lomoMap = rep.leave_one_model_out || {}, loco = rep.leave_one_context_out || {};
      var lomo = Object.keys(lomoMap).map(function (k) { return lomoMap[k]; });
      var locoKeys = Object.keys(loco), context = m.prompt + m.gen, nearest = null, best = Infinity;
      locoKeys.forEach(function (k) {
        var pg = k.split("/"), d = Math.abs(Math.log(Number(pg[0]) + Number(pg[1])) - Math.log(Math.max(context, 1)));
        if (d < best) { best = d; nearest = k; }
      });
      var held = [lomo].concat(nearest ? [[loco[nearest]]] : []);
      var basis = "held-out errors of the calibration (leave one model out; leave out the nearest context";
      basis += nearest ? ", " + nearest + ")" : ")";
      var category = m.model.moe_layers ? "moe" : m.tp > 1 ? "tp" : null;
      var validation = (rep.validation || {})[category || "dense"];
      if (validation && category) {
        held = [[validation]];
        basis = "held-out " + (validation.what || category) + " (" + (validation.models || []).join(", ") + ")";
      } else if (validation) {
        held.push([validation]);
        basis = basis.slice(0, -1) + "; held-out " + (validation.models || []).join(", ") + ")";
      } else if (!lomo.length && !locoKeys.length) {
        held = [[rep.in_sample || {}]];
        basis = "the calibration's in-sample error (it held nothing out, so this understates it)";
      }
      function pick(key) {
        var values = held.map(function (group) {
          return mean(group.map(function (e) { var v = e[ERROR_KEYS[key]]; return v === undefined ? null : v; }));
        }).filter(function (v) { return v !== null; });
        return values.length ? Math.max.apply(null, values) : null;
      }
      var ttftSmall = pick("ttft"), ttftLarge = pick("ttft_large"), tpot = pick("tpot");
      // roofline.confidence.share_bin_error: at least the held-out error of steps as overhead-bound
      var bins = (validation || {}).tpot_mape_by_overhead_share || null;
      if (bins && bins.some(function (b) { return b.points >= MIN_BIN_POINTS; })) {
        basis = basis.slice(0, -1) + "; each row at least the held-out error of steps as much fixed overhead)";
      }
      function shareError(share) {
        if (!bins || share === undefined || share === null) return null;
        for (var i = 0; i < bins.length; i++) {
          var b = bins[i], last = i === bins.length - 1;
          if (b.from <= share && (last ? share <= b.to : share < b.to)) {
            return b.points >= MIN_BIN_POINTS ? b.tpot_mape_fraction : null;
          }
        }
        return null;
      }
      return { tpot: function (batch, share) {
                 var e = shareError(share);
                 if (e === null) return tpot;
                 return tpot === null || isNaN(tpot) ? e : Math.max(tpot, e);
               },
               ttft: function (b) { return b >= 64 ? ttftLarge : ttftSmall; },
               peak_mem_fraction: pick("peak_mem"), basis: basis };
    }

    // extrapolation: the reasons shared by every batch, and the batch beyond which one more applies
    function extrapolation(m) {
      var common = [];
      if (!m.calibrated) {
        common.push("no calibration: the card's ceilings alone (a floor)");
        return { common: common, batch_max: null };
      }
      if (m.calCard !== m.card.id) common.push("calibration fitted on " + m.calCard + ", not " + m.card.id);
      var transferred = (m.cal.fit_report || {}).transferred;
      if (transferred && !transferred.measured_on_this_card) {
        common.push("no " + transferred.engine + " measurement of " + m.card.id + ": the " + transferred.engine
                    + " profile's terms, transferred");
      }
      var cov = (m.cal.fit_report || {}).coverage;
      if (!cov) {
        common.push("the calibration records no coverage (fitted before roofline 0.2)");
        return { common: common, batch_max: null };
      }
      var model = m.model, context = m.prompt + m.gen;
      var lo = cov.context_tokens[0], hi = cov.context_tokens[1];
      if (context > hi) common.push("context " + thousands(context) + " tokens beyond the " + thousands(hi) + " the calibration saw");
      else if (context < lo) common.push("context " + thousands(context) + " tokens below the " + thousands(lo) + " the calibration saw");
      var range = model.moe_layers && cov.moe_params ? cov.moe_params : cov.params;
      if (model.params > SIZE_MARGIN * range[1] || model.params < range[0] / SIZE_MARGIN) {
        common.push("model of " + model.params_label + "B parameters outside the " + formatG2(range[0] / 1e9) + "-"
                    + formatG2(range[1] / 1e9) + "B the calibration saw");
      }
      if (cov.weight_dtypes.indexOf(m.weightDtype) < 0) {
        common.push("weights in " + m.weightDtype + ", the calibration saw " + cov.weight_dtypes.join(", "));
      }
      if (cov.kv_dtypes.indexOf(m.kvDtype) < 0) common.push("KV cache in " + m.kvDtype + ", the calibration saw " + cov.kv_dtypes.join(", "));
      var label = model.attention_label, gqaLike = ["mha", "mqa", "gqa"].indexOf(label) >= 0;
      var sawGqa = cov.attention.some(function (a) { return ["mha", "gqa", "mqa"].indexOf(a) >= 0; });
      if (cov.attention.indexOf(label) < 0 && !(gqaLike && sawGqa)) {
        common.push(label + " attention, the calibration saw " + cov.attention.join(", "));
      }
      if (model.moe_layers && !cov.moe) common.push("mixture of experts: the calibration saw dense models only");
      if (model.windowed && !cov.windows) common.push("sliding-window layers: the calibration saw full attention only");
      if (model.sinks && !cov.sinks) common.push("attention sinks: the calibration saw none");
      var tps = [];
      cov.tp.concat(cov.link_tp || []).forEach(function (t) { if (tps.indexOf(t) < 0) tps.push(t); });
      tps.sort(function (a, b) { return a - b; });
      if (tps.indexOf(m.tp) < 0) common.push("tensor parallelism " + m.tp + ": the calibration measured " + tps.join(" and ") + " GPU(s)");
      var shareRange = model.moe_layers && cov.moe_overhead_share ? cov.moe_overhead_share : cov.overhead_share;
      return { common: common, batch_max: cov.batch[1], overhead_share_max: shareRange ? shareRange[1] : null };
    }

    function confidence(m) {
      if (!m.conf) m.conf = { errors: expectedErrors(m), extrapolation: extrapolation(m) };
      return m.conf;
    }

    // the per-row confidence of roofline.prediction.Prediction.rows: expected_error and extrapolation
    // (share: the row's decode step's overhead share, roofline.confidence.overhead_share)
    function rowConfidence(m, batch, share) {
      var conf = confidence(m), e = conf.errors, x = conf.extrapolation;
      var reasons = x.common.slice();
      if (x.batch_max !== null && batch > x.batch_max) {
        reasons.push("batch " + thousands(batch) + " beyond the " + thousands(x.batch_max) + " the calibration saw");
      }
      if (x.overhead_share_max !== null && x.overhead_share_max !== undefined && share !== undefined
          && share > x.overhead_share_max + OVERHEAD_SHARE_MARGIN) {
        reasons.push("a step " + (100 * share).toFixed(0) + "% fixed overhead, beyond the "
                     + (100 * x.overhead_share_max).toFixed(0) + "% of the most overhead-bound step the calibration was fitted on");
      }
      return { expected_error: { tpot_fraction: e.tpot(batch, share), ttft_fraction: e.ttft(batch), peak_mem_fraction: e.peak_mem_fraction },
               extrapolation: reasons };
    }

    // one row of roofline.prediction.evaluate (and Prediction.rows' confidence)
    function row(m, batch, ctx) {
      var dec = meanDecode(m, batch, ctx), pre = prefill(m, batch), mem = peakMemory(m, batch);
      var tpot = dec.step_s, ttft = pre.ttft_s, conf = rowConfidence(m, batch, tpot > 0 ? dec.overhead_s / tpot : 0);
      return {
        batch: batch, ttft_s: ttft, tpot_s: tpot, per_user_tok_s: 1.0 / tpot, throughput_tok_s: batch / tpot,
        peak_mem_gib: mem.peak_bytes / DATA.gib,
        intensity_flop_per_byte: dec.linear_flop / dec.bytes_counted,
        compute_ceiling_fraction: dec.linear_flop / tpot / m.peak,
        bandwidth_ceiling_fraction: dec.bytes_counted / tpot / m.bw,
        bound: BOUNDS[dec.bound_index], e2e_s: ttft + Math.max(m.gen - 1, 0) * tpot,
        ttft_bound: BOUNDS[pre.bound_index], peak_mem_bytes: mem.peak_bytes,
        fits_in_memory: mem.peak_bytes <= m.card.memory_bytes,
        weights_bytes: mem.weights_bytes, kv_cache_bytes: mem.kv_bytes, activations_bytes: mem.activations_bytes,
        logits_bytes: mem.logits_bytes, workspace_bytes: mem.workspace_bytes,
        bytes_per_step: dec.bytes_counted, flop_per_step: dec.linear_flop + dec.attention_flop,
        linear_flop_per_step: dec.linear_flop,
        step_overhead_s: dec.overhead_s, step_memory_s: dec.memory_s, step_compute_s: dec.compute_s,
        step_collectives_s: dec.collectives_s,
        expected_error: conf.expected_error, extrapolation: conf.extrapolation,
      };
    }

    function rows(m, batches) {
      var ctx = contexts(m);
      return batches.map(function (b) { return row(m, b, ctx); });
    }

    // roofline.prediction._pow2_bracket
    function pow2Bracket(loValue, hiValue) {
      var lo = Math.pow(2, Math.max(0, Math.ceil(Math.log2(loValue)) - 1));
      var hi = Math.pow(2, Math.ceil(Math.log2(hiValue)));
      return [lo, Math.max(hi, lo * 2)];
    }

    var GRID = null, LOGGRID = null;
    function bendGrid() { // roofline.prediction.bend_grid
      if (!GRID) {
        GRID = [];
        for (var b = 1; b <= 4096; b++) GRID.push(b);
        GRID = GRID.concat(DATA.bend_grid_tail);
        LOGGRID = GRID.map(function (x) { return Math.log(x); });
      }
      return GRID;
    }

    // roofline.prediction.bend
    function bend(m) {
      var model = m.model, balance = m.balance, ctx = contexts(m), moe = model.moe_layers > 0;
      var dec1 = meanDecode(m, 1.0, ctx);
      var weights1 = m.weightRead;
      if (moe) weights1 -= model.moe_layers * m.expertBytes * (model.num_experts - expertsTouched(m, 1.0));
      var kvPerRequest = dec1.bytes_counted - weights1;
      var flopPerRequest = model.linear_flop_per_token;
      var limit = kvPerRequest > 0 ? flopPerRequest / kvPerRequest : Infinity;
      var crossing = null, saturated = null, grid = bendGrid(), n = grid.length, i;
      if (moe) { // the weights a step reads grow with the experts its tokens touch: solve on the grid
        for (i = 0; i < n && (crossing === null || saturated === null); i++) {
          var touched = expertsTouched(m, grid[i]);
          var weights = m.weightRead - model.moe_layers * m.expertBytes * (model.num_experts - touched);
          if (crossing === null && grid[i] * flopPerRequest >= balance * (weights + grid[i] * kvPerRequest)) crossing = grid[i];
          if (saturated === null && touched >= 0.9 * model.num_experts) saturated = grid[i];
        }
      } else if (flopPerRequest > balance * kvPerRequest) {
        var exact = balance * m.weightRead / (flopPerRequest - balance * kvPerRequest);
        crossing = Math.max(1, Math.ceil(exact - 1e-9));
      }
      // the same grid and test as Python's, but TPOT is evaluated only where the search looks
      // (from the experts' saturation up to the first hit), not on all ~4,600 batches
      var logG = LOGGRID, logT = new Float64Array(n).fill(NaN);
      function lt(j) {
        if (isNaN(logT[j])) logT[j] = Math.log(tpotOnly(m, grid[j], ctx));
        return logT[j];
      }
      var knee = null, from = saturated || 1;
      for (i = 0; i < n; i++) {
        if (grid[i] < from) continue;
        var doubled = interp(Math.log(grid[i] * 2), logG, lt, NaN);
        var slope = (doubled - lt(i)) / Math.log(2.0);
        if (slope >= KNEE_ELASTICITY) { knee = Math.trunc(grid[i] * Math.SQRT2); break; }
      }
      var found = [crossing, knee].filter(function (x) { return x !== null; });
      var region = [null, null];
      if (found.length) region = pow2Bracket(Math.min.apply(null, found), Math.max.apply(null, found));
      return { crossing_batch: crossing, knee_batch: knee, balance_point_flop_per_byte: balance,
               intensity_limit_flop_per_byte: limit, region_low_batch: region[0], region_high_batch: region[1],
               experts_saturated_batch: saturated, num_experts: moe ? model.num_experts : 0 };
    }

    // the largest batch (1..maxBatch) for which ok(batch) holds, ok monotone (true then false)
    function largestBatch(ok, maxBatch) {
      if (!ok(1)) return null;
      var lo = 1, hi = maxBatch;
      if (ok(hi)) return hi;
      while (hi - lo > 1) {
        var mid = Math.floor((lo + hi) / 2);
        if (ok(mid)) lo = mid; else hi = mid;
      }
      return lo;
    }

    // roofline.choice.choose_batch: memory alone, or TTFT and memory (TTFT and memory grow with the batch)
    function fitsBatch(m, maxBatch) {
      return largestBatch(function (b) { return peakMemory(m, b).peak_bytes <= m.card.memory_bytes; }, maxBatch);
    }
    function chosenBatch(m, ttftMax, maxBatch) {
      return largestBatch(function (b) {
        return prefill(m, b).ttft_s <= ttftMax && peakMemory(m, b).peak_bytes <= m.card.memory_bytes;
      }, maxBatch);
    }

    // Everything the parity tests compare with Python for one setting (the page's initial settings
    // overridden by ``settings``): predict's rows at settings.batches (with the expected error and
    // the extrapolation), the bend, the expected error's basis, the chosen and the largest fitting
    // batch (roofline choose). serving.js adds static waste and both servers.
    function compute(settings) {
      var s = Object.assign({}, DATA.initial, settings);
      var maxBatch = DATA.bend_max_batch;
      var m = scenario(s);
      var batches = s.batches || [1, 2, 4, 8, 16, 32, 64, 128];
      return { rows: rows(m, batches), bend: bend(m), expected_error_basis: confidence(m).errors.basis,
               chosen_batch: chosenBatch(m, Number(s.ttft_max_s), maxBatch), fits_batch: fitsBatch(m, maxBatch) };
    }

    return {
      DATA: DATA, compute: compute, pnorm: pnorm, scenario: scenario, work: work, decodeWork: decodeWork,
      prefillWork: prefillWork, passParts: passParts, passS: passS, passBreakdown: passBreakdown,
      expertsTouched: expertsTouched, meanDecode: meanDecode, prefill: prefill, peakMemory: peakMemory,
      confidence: confidence, rowConfidence: rowConfidence, row: row, rows: rows, bend: bend, contexts: contexts,
      fitsBatch: fitsBatch, chosenBatch: chosenBatch, CARDS: CARDS, MODELS: MODELS, thousands: thousands,
    };
  }

  return { create: create, formatG2: formatG2, thousands: thousands };
})();

if (typeof module !== "undefined" && module.exports) module.exports = RooflineModel; // node (tests/test_model_js.py)
