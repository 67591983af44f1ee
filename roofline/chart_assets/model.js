/* The roofline model, ported from the Python package so the page can redraw every what-if
 * without a server. Each function names the Python function it mirrors; the numbers it reads
 * come from roofline.chart_data.page_data(). tests/test_model_js.py runs this file under node
 * against the Python package on many scenarios (to 1e-9); the browser test checks the page.
 * Base units throughout: bytes, FLOP, seconds, bytes/s, FLOP/s. */
"use strict";

var RooflineModel = (function () {
  var SAMPLES = 16; // roofline.decode.decode_contexts(samples=16)
  var BOUNDS = ["overhead", "memory", "compute"]; // roofline.step.BOUNDS
  var KNEE_ELASTICITY = 0.5; // roofline.prediction.KNEE_ELASTICITY

  function create(DATA) {
    var CARDS = {}, MODELS = {};
    DATA.cards.forEach(function (c) { CARDS[c.id] = c; });
    DATA.models.forEach(function (m) { MODELS[m.name] = m; });

    var MAX_EXPONENT = DATA.max_exponent; // roofline.calibration.MAX_EXPONENT

    // roofline.step.pnorm: a sum at p <= 1, exactly the max at p >= MAX_EXPONENT, a blend between
    function pnorm(a, b, p) {
      if (p <= 1.0) return a + b;
      var hi = Math.max(a, b);
      if (p >= MAX_EXPONENT || hi <= 0) return hi;
      var ratio = Math.min(a, b) / hi;
      return hi * Math.exp(Math.log1p(Math.pow(ratio, p)) / p);
    }

    // roofline.scenario.make_scenario + roofline.step.StepModel (its derived scalars and _c)
    function scenario(s) {
      var card = CARDS[s.card], model = MODELS[s.model];
      if (!card) throw new Error("unknown card " + s.card);
      if (!model) throw new Error("unknown model " + s.model);
      var cal = s.calibrated !== false && card.fitted ? card.fitted : card.pure;
      var kvCache = !s.kv_cache || s.kv_cache === "auto" ? cal.kv_cache : s.kv_cache;
      var bw = cal.measured_bandwidth_bytes_per_s || card.bandwidth_bytes_per_s;
      var peak = cal.measured_peak_flop_per_s || card.peak_flop_per_s;
      var m = {
        card: card, model: model, cal: cal, kvCache: kvCache,
        logits: s.logits || "last",
        prompt: Number(s.prompt_tokens), gen: Number(s.gen_tokens),
        weightDtype: s.weight_dtype, kvDtype: s.kv_dtype,
        weightRead: model.decode_weight_bytes[s.weight_dtype],
        weightResident: model.weight_bytes[s.weight_dtype],
        kvb: model.kv_bytes_per_token[s.kv_dtype],
        bw: bw, peak: peak, balance: peak / bw,
        overhead: cal.step_overhead_s + cal.layer_overhead_s * model.num_hidden_layers,
        actBpt: cal.activation_traffic_coeff * model.act_width_bytes_per_token,
        preActBpt: cal.prefill_activation_traffic_coeff * model.act_width_bytes_per_token,
      };
      var sPerByte = 1.0 / (cal.bandwidth_efficiency * bw);
      var sPerDecodeFlop = 1.0 / (cal.compute_efficiency * peak);
      var sPerAttentionFlop = 1.0 / (cal.attention_efficiency * peak);
      var sPerPrefillFlop = 1.0 / (cal.prefill_compute_efficiency * peak);
      var attnFlop = model.attention_flop_per_context_token;
      m.c = [
        cal.prefill_overhead_s,                                 // 0 prefill overhead
        Math.max(m.overhead, cal.prefill_overhead_s),           // 1 mixed-pass overhead
        m.weightRead * sPerByte,                                // 2 matmul memory
        model.linear_flop_per_token * sPerDecodeFlop,           // 3 per decode token
        model.body_linear_flop_per_token * sPerPrefillFlop,     // 4 per prompt token
        2.0 * model.lm_head_params * sPerPrefillFlop,           // 5 per prefill logit row
        m.kvb * sPerByte,                                       // 6 per KV token moved
        cal.kv_traffic_factor,                                  // 7 KV moved per KV read
        attnFlop * sPerAttentionFlop,                           // 8 per decode pair
        attnFlop * sPerPrefillFlop,                             // 9 per prefill pair
        m.actBpt * sPerByte,                                    // 10 per decode token
        m.preActBpt * sPerByte,                                 // 11 per prompt token
        cal.roofline_exponent,                                  // 12 p
        cal.overhead_exponent,                                  // 13 q
      ];
      return m;
    }

    // roofline.step.PassWork, decode_work, prefill_work
    function work(d, kv, p, pairs, rows) {
      return { d: d || 0.0, kv: kv || 0.0, p: p || 0.0, pairs: pairs || 0.0, rows: rows || 0.0 };
    }
    function decodeWork(batch, kvRead) { return work(batch, kvRead, 0, 0, 0); }
    function prefillWork(tokens, pairs, rows) { return work(0, 0, tokens, pairs, rows); }

    // StepModel.overhead_s
    function overheadS(m, d, p) {
      if (p > 0) return d > 0 ? m.c[1] : m.c[0];
      return m.overhead;
    }

    // StepModel.pass_parts: [overhead, matmul memory, matmul compute, attention memory, attention compute, elementwise]
    function passParts(m, w) {
      var c = m.c;
      return [overheadS(m, w.d, w.p), c[2], w.d * c[3] + w.p * c[4] + w.rows * c[5],
              (c[7] * w.kv + w.d + w.p) * c[6], w.kv * c[8] + w.pairs * c[9], w.d * c[10] + w.p * c[11]];
    }

    // StepModel.pass_s
    function passS(m, w) {
      var x = passParts(m, w), p = m.c[12];
      return pnorm(x[0], pnorm(x[1], x[2], p) + pnorm(x[3], x[4], p) + x[5], m.c[13]);
    }

    // StepModel.pass_breakdown: [total, overhead, memory, compute]
    function passBreakdown(m, w) {
      var x = passParts(m, w), p = m.c[12];
      var gemm = pnorm(x[1], x[2], p), attn = pnorm(x[3], x[4], p);
      var total = pnorm(x[0], gemm + attn + x[5], m.c[13]);
      var gemmOnMemory = x[1] >= x[2], attnOnMemory = x[3] >= x[4];
      var memory = (gemmOnMemory ? gemm : 0.0) + (attnOnMemory ? attn : 0.0) + x[5];
      var compute = (gemmOnMemory ? 0.0 : gemm) + (attnOnMemory ? 0.0 : attn);
      return [total, x[0], memory, compute];
    }

    // StepModel.linear_flop, attention_flop, bytes_counted
    function linearFlop(m, w) {
      return w.d * m.model.linear_flop_per_token + w.p * m.model.body_linear_flop_per_token
        + w.rows * 2.0 * m.model.lm_head_params;
    }
    function attentionFlop(m, w) { return (w.kv + w.pairs) * m.model.attention_flop_per_context_token; }
    function bytesCounted(m, w) { return m.weightRead + (w.kv + w.p) * m.kvb; }

    // roofline.decode.decode_step for one (batch, context): [total, overhead, memory, compute, counted, linear, attention]
    function decodeStep(m, batch, context) {
      var w = decodeWork(batch, batch * context), t = passBreakdown(m, w);
      return [t[0], t[1], t[2], t[3], bytesCounted(m, w), linearFlop(m, w), attentionFlop(m, w)];
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

    function argmax3(a, b, c) {
      return a >= b ? (a >= c ? 0 : 2) : (b >= c ? 1 : 2);
    }

    // roofline.decode.mean_decode for one batch
    function meanDecode(m, batch, ctx) {
      ctx = ctx || contexts(m);
      var acc = [0, 0, 0, 0, 0, 0, 0], w = 1.0 / SAMPLES, meanCtx = 0;
      for (var k = 0; k < SAMPLES; k++) {
        var v = decodeStep(m, batch, ctx[k]);
        for (var i = 0; i < 7; i++) acc[i] += v[i] * w;
        meanCtx += ctx[k] * w;
      }
      return {
        step_s: acc[0], overhead_s: acc[1], memory_s: acc[2], compute_s: acc[3],
        bytes_counted: acc[4], linear_flop: acc[5], attention_flop: acc[6],
        bound_index: argmax3(acc[1], acc[2], acc[3]), mean_context_tokens: meanCtx,
      };
    }

    // TPOT only (roofline.prediction.bend's grid): mean_decode's step time, without its other parts
    function tpotOnly(m, batch, ctx) {
      var acc = 0, w = 1.0 / SAMPLES;
      for (var k = 0; k < SAMPLES; k++) acc += passS(m, decodeWork(batch, batch * ctx[k])) * w;
      return acc;
    }

    // roofline.prefill.logit_positions
    function logitPositions(batch, prompt, logits) {
      return logits === "last" ? batch : batch * prompt;
    }

    // roofline.prefill.prefill (static_prefill_work, then pass_breakdown)
    function prefill(m, batch) {
      var prompt = m.prompt, tokens = batch * prompt;
      var w = prefillWork(tokens, batch * prompt * (prompt + 1.0) / 2.0, logitPositions(batch, prompt, m.logits));
      var t = passBreakdown(m, w);
      return { ttft_s: t[0], overhead_s: t[1], memory_s: t[2], compute_s: t[3],
               bytes: bytesCounted(m, w) + tokens * m.preActBpt, flop: linearFlop(m, w) + attentionFlop(m, w),
               bound_index: argmax3(t[1], t[2], t[3]) };
    }

    // roofline.memory.peak_memory
    function peakMemory(m, batch) {
      var cal = m.cal, model = m.model, prompt = m.prompt, gen = m.gen;
      var actBytes = model.act_dtype_bytes;
      var weights = m.weightResident;
      var kvFull = batch * (prompt + gen) * m.kvb;
      var kvPrompt = m.kvCache === "static" ? kvFull : batch * prompt * m.kvb;
      var tokens = batch * prompt;
      var actPrefill = cal.activation_coeff * tokens * model.intermediate_size * actBytes;
      var logitsPrefill = logitPositions(batch, prompt, m.logits) * model.logits_bytes_per_position;
      var logitsDecode = batch * model.logits_bytes_per_position;
      var atPrefill = kvPrompt + actPrefill + logitsPrefill;
      var atEnd = kvFull + logitsDecode;
      var prefillWins = atPrefill >= atEnd;
      var kv = prefillWins ? kvPrompt : kvFull;
      var act = prefillWins ? actPrefill : 0.0;
      var logitsB = prefillWins ? logitsPrefill : logitsDecode;
      return { peak_bytes: weights + kv + act + logitsB + cal.workspace_bytes, weights_bytes: weights,
               kv_bytes: kv, activations_bytes: act, logits_bytes: logitsB, workspace_bytes: cal.workspace_bytes,
               peak_at: prefillWins ? "prefill" : "end" };
    }

    // one row of roofline.prediction.evaluate
    function row(m, batch, ctx) {
      var dec = meanDecode(m, batch, ctx), pre = prefill(m, batch), mem = peakMemory(m, batch);
      var tpot = dec.step_s, ttft = pre.ttft_s;
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
      };
    }

    function rows(m, batches) {
      var ctx = contexts(m);
      return batches.map(function (b) { return row(m, b, ctx); });
    }

    // numpy.interp for increasing xp, one x, right=NaN; fp(j) gives the j-th value on demand
    function interp(x, xp, fp) {
      var n = xp.length;
      if (x > xp[n - 1]) return NaN;
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

    // roofline.prediction._pow2_bracket
    function pow2Bracket(loValue, hiValue) {
      var lo = Math.pow(2, Math.max(0, Math.ceil(Math.log2(loValue)) - 1));
      var hi = Math.pow(2, Math.ceil(Math.log2(hiValue)));
      return [lo, Math.max(hi, lo * 2)];
    }

    var GRID = null, LOGGRID = null;
    function bendLogGrid() {
      if (!LOGGRID) LOGGRID = bendGrid().map(function (b) { return Math.log(b); });
      return LOGGRID;
    }
    function bendGrid() {
      if (!GRID) {
        GRID = [];
        for (var b = 1; b <= 4096; b++) GRID.push(b);
        GRID = GRID.concat(DATA.bend_grid_tail);
      }
      return GRID;
    }

    // roofline.prediction.bend
    function bend(m) {
      var model = m.model, balance = m.balance, ctx = contexts(m);
      var dec1 = meanDecode(m, 1.0, ctx);
      var kvPerRequest = dec1.bytes_counted - m.weightRead;
      var flopPerRequest = model.linear_flop_per_token;
      var limit = kvPerRequest > 0 ? flopPerRequest / kvPerRequest : Infinity;
      var crossing = null;
      if (flopPerRequest > balance * kvPerRequest) {
        var exact = balance * m.weightRead / (flopPerRequest - balance * kvPerRequest);
        crossing = Math.max(1, Math.ceil(exact - 1e-9));
      }
      // the same grid and test as Python's, but TPOT is evaluated only where the search looks
      // (up to the first hit), not on all ~4,600 batches
      var grid = bendGrid(), n = grid.length, logG = bendLogGrid(), logT = new Float64Array(n).fill(NaN);
      function lt(j) {
        if (isNaN(logT[j])) logT[j] = Math.log(tpotOnly(m, grid[j], ctx));
        return logT[j];
      }
      var knee = null;
      for (var i = 0; i < n; i++) {
        var doubled = interp(Math.log(grid[i] * 2), logG, lt);
        var slope = (doubled - lt(i)) / Math.log(2.0);
        if (slope >= KNEE_ELASTICITY) { knee = Math.trunc(grid[i] * Math.SQRT2); break; }
      }
      var found = [crossing, knee].filter(function (x) { return x !== null; });
      var region = [null, null];
      if (found.length) region = pow2Bracket(Math.min.apply(null, found), Math.max.apply(null, found));
      return { crossing_batch: crossing, knee_batch: knee, balance_point_flop_per_byte: balance,
               intensity_limit_flop_per_byte: limit, region_low_batch: region[0], region_high_batch: region[1] };
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

    function fitsBatch(m, maxBatch) {
      return largestBatch(function (b) { return peakMemory(m, b).peak_bytes <= m.card.memory_bytes; }, maxBatch);
    }

    function chosenBatch(m, ttftMax, maxBatch) {
      return largestBatch(function (b) {
        return prefill(m, b).ttft_s <= ttftMax && peakMemory(m, b).peak_bytes <= m.card.memory_bytes;
      }, maxBatch);
    }

    // ---- static batching (roofline.batching) and the two servers (roofline.serving) ----
    // roofline.batching.parse_mix
    function parseMix(text) {
      var items = String(text).split(",").map(function (s) { return s.trim(); });
      return items.map(function (item, n) {
        var parts = item.toLowerCase().split("x");
        var ok = parts.length === 2 && parts.every(function (x) { return /^[0-9]+$/.test(x.trim()); });
        if (!ok) throw new Error("mix item " + (n + 1) + " '" + item + "': use COUNTxGEN, e.g. 8x32");
        var count = parseInt(parts[0], 10), gen = parseInt(parts[1], 10);
        if (count < 1 || gen < 1) throw new Error("mix item " + (n + 1) + " '" + item + "': count and length must be at least 1");
        return [count, gen];
      });
    }

    // roofline.batching.interleave: round-robin across the classes
    function interleave(classes) {
      var gens = [], cls = [], most = Math.max.apply(null, classes.map(function (c) { return c[0]; }));
      for (var r = 0; r < most; r++) {
        for (var k = 0; k < classes.length; k++) {
          if (r < classes[k][0]) { gens.push(classes[k][1]); cls.push(k); }
        }
      }
      return { gens: gens, cls: cls };
    }

    // roofline.batching.requests_from_mix (count: repeat the interleaved order up to count)
    function mixStream(mix, count) {
      var base = interleave(parseMix(mix)), gens = base.gens, cls = base.cls;
      if (count) {
        var g2 = [], c2 = [];
        for (var i = 0; i < count; i++) { g2.push(gens[i % gens.length]); c2.push(cls[i % cls.length]); }
        gens = g2; cls = c2;
      }
      return { gens: gens, cls: cls };
    }

    // roofline.batching.token_accounting
    function tokenAccounting(gens, batch) {
      var n = gens.length, size = batch || n, needed = 0, slots = 0, batches = [];
      for (var s = 0; s < n; s += size) {
        var e = Math.min(n, s + size), longest = 0;
        for (var i = s; i < e; i++) { longest = Math.max(longest, gens[i]); needed += gens[i]; }
        slots += (e - s) * longest;
        batches.push({ start: s, end: e, longest: longest });
      }
      return { requests: n, batches: batches.length, tokens_needed: needed, slots_used: slots,
               wasted_slots: slots - needed, waste_fraction: (slots - needed) / slots, batch_list: batches };
    }

    // roofline.serving.static_batch_times
    function staticBatchTimes(m, prompts, gens) {
      var n = gens.length, longest = Math.max.apply(null, gens), promptSum = 0, pairs = 0;
      for (var i = 0; i < n; i++) { promptSum += prompts[i]; pairs += prompts[i] * (prompts[i] + 1.0); }
      var pre = passS(m, prefillWork(promptSum, pairs / 2.0, n));
      var cum = [0.0];
      for (var k = 1; k < longest; k++) cum.push(cum[k - 1] + passS(m, decodeWork(n, promptSum + n * k)));
      return { pre: pre, cum: cum };
    }

    // roofline.batching.mix_waste (return policy whole-batch)
    function mixWaste(m, mix, batch) {
      var classes = parseMix(mix), st = mixStream(mix), gens = st.gens, n = gens.length;
      var acct = tokenAccounting(gens, batch), e2e = new Array(n), ttft = new Array(n);
      acct.batch_list.forEach(function (b) {
        var g = gens.slice(b.start, b.end), p = g.map(function () { return m.prompt; });
        var t = staticBatchTimes(m, p, g);
        for (var i = b.start; i < b.end; i++) { ttft[i] = t.pre; e2e[i] = t.pre + t.cum[t.cum.length - 1]; }
        b.prefill_s = t.pre; b.end_s = t.pre + t.cum[t.cum.length - 1];
      });
      acct.classes = classes.map(function (c, k) {
        var sum = 0, cnt = 0, tsum = 0;
        for (var i = 0; i < n; i++) if (st.cls[i] === k) { sum += e2e[i]; tsum += ttft[i]; cnt++; }
        var size = Math.min(c[0], batch || c[0]), g = [], p = [];
        for (i = 0; i < size; i++) { g.push(c[1]); p.push(m.prompt); }
        var alone = staticBatchTimes(m, p, g), aloneE2e = alone.pre + alone.cum[alone.cum.length - 1];
        return { "class": c[0] + "x" + c[1], count: c[0], gen_tokens: c[1], ttft_in_batch_s: tsum / cnt,
                 e2e_in_batch_s: sum / cnt, alone_batch: size, e2e_alone_s: aloneE2e, slowdown: (sum / cnt) / aloneE2e };
      });
      var shortest = acct.classes.reduce(function (a, b) { return b.gen_tokens < a.gen_tokens ? b : a; });
      acct.short_request_slowdown = shortest.slowdown;
      acct.gens = gens; acct.cls = st.cls;
      return acct;
    }

    // numpy.percentile, linear
    function percentile(values, q) {
      var v = values.slice().sort(function (a, b) { return a - b; });
      var pos = (q / 100) * (v.length - 1), lo = Math.floor(pos), hi = Math.ceil(pos);
      return v[lo] + (v[hi] - v[lo]) * (pos - lo);
    }

    function summary(out) {
      var s = { requests: out.e2e_s.length, generated_tokens: out.useful, makespan_s: out.makespan_s,
                throughput_tok_s: out.useful / out.makespan_s, passes: out.passes, slot_steps: out.slots * out.passes,
                idle_slot_steps: out.slots * out.passes - out.useful };
      s.mean_occupancy = out.useful / s.slot_steps;
      s.waste_fraction = s.idle_slot_steps / s.slot_steps;
      [50, 90, 99].forEach(function (q) {
        s["ttft_p" + q + "_s"] = percentile(out.ttft_s, q);
        s["e2e_p" + q + "_s"] = percentile(out.e2e_s, q);
      });
      out.summary = s;
      return out;
    }

    // roofline.serving.serve_static, every request arriving at t = 0
    function serveStatic(m, prompts, gens, slots, returnPolicy) {
      var n = gens.length, ttft = new Array(n), finish = new Array(n), t = 0, passes = 0, useful = 0;
      var whole = returnPolicy === "whole-batch";
      for (var i = 0; i < n; i += slots) {
        var j = Math.min(i + slots, n), tb = staticBatchTimes(m, prompts.slice(i, j), gens.slice(i, j));
        var first = t + tb.pre;
        t = first + tb.cum[tb.cum.length - 1];
        for (var r = i; r < j; r++) { ttft[r] = first; finish[r] = whole ? t : first + tb.cum[gens[r] - 1]; useful += gens[r]; }
        passes += tb.cum.length;
      }
      return summary({ ttft_s: ttft, e2e_s: finish.slice(), finish_s: finish, slots: slots, passes: passes,
                       useful: useful, makespan_s: Math.max.apply(null, finish) });
    }

    // roofline.serving.serve_continuous, every request arriving at t = 0
    function serveContinuous(m, prompts, gens, slots) {
      var n = gens.length, ttft = new Array(n), finish = new Array(n), ends = new Map();
      var t = 0, it = 0, nxt = 0, running = 0, kv = 0, useful = 0;
      while (nxt < n || running) {
        var k = running < slots && nxt < n ? Math.min(slots - running, n - nxt) : 0;
        if (k) {
          var j = nxt + k, pTok = 0, pPairs = 0, p1 = 0;
          for (var r = nxt; r < j; r++) { pTok += prompts[r]; pPairs += prompts[r] * (prompts[r] + 1.0) / 2.0; p1 += prompts[r] + 1.0; }
          t += passS(m, work(running, kv, pTok, pPairs, k));
          it += 1;
          kv += running + p1;
          for (r = nxt; r < j; r++) {
            ttft[r] = t;
            var at = it + gens[r] - 1;
            if (!ends.has(at)) ends.set(at, []);
            ends.get(at).push(r);
          }
          running += k;
          nxt = j;
        } else {
          t += passS(m, decodeWork(running, kv));
          it += 1;
          kv += running;
        }
        useful += running;
        var done = ends.get(it);
        if (done) {
          done.forEach(function (r) { finish[r] = t; kv -= prompts[r] + gens[r]; running -= 1; });
          ends.delete(it);
        }
      }
      return summary({ ttft_s: ttft, e2e_s: finish.slice(), finish_s: finish, slots: slots, passes: it,
                       useful: useful, makespan_s: Math.max.apply(null, finish) });
    }

    // Everything the parity tests compare with Python for one setting (the page's initial settings
    // overridden by ``settings``): predict's rows at settings.batches, the bend, the chosen and the
    // largest fitting batch (roofline choose), static waste (roofline waste) and both servers.
    function compute(settings) {
      var s = Object.assign({}, DATA.initial, settings);
      var maxBatch = DATA.bend_max_batch;
      var m = scenario(s);
      var batches = s.batches || [1, 2, 4, 8, 16, 32, 64, 128];
      var out = { rows: rows(m, batches), bend: bend(m), chosen_batch: chosenBatch(m, Number(s.ttft_max_s), maxBatch),
                  fits_batch: fitsBatch(m, maxBatch) };
      var w = mixWaste(m, s.mix, Number(s.batch));
      delete w.batch_list;
      out.waste = w;
      var stream = mixStream(s.mix, Number(s.stream_count));
      var prompts = stream.gens.map(function () { return m.prompt; });
      out.serve_static = serveStatic(m, prompts, stream.gens, Number(s.batch), s.return_policy).summary;
      out.serve_continuous = serveContinuous(m, prompts, stream.gens, Number(s.batch)).summary;
      return out;
    }

    return {
      compute: compute, pnorm: pnorm, scenario: scenario, work: work, decodeWork: decodeWork, prefillWork: prefillWork,
      passParts: passParts, passS: passS, passBreakdown: passBreakdown, meanDecode: meanDecode, prefill: prefill,
      peakMemory: peakMemory,
      row: row, rows: rows, bend: bend, contexts: contexts, fitsBatch: fitsBatch, chosenBatch: chosenBatch,
      parseMix: parseMix, interleave: interleave, mixStream: mixStream, tokenAccounting: tokenAccounting,
      mixWaste: mixWaste, staticBatchTimes: staticBatchTimes, serveStatic: serveStatic,
      serveContinuous: serveContinuous, CARDS: CARDS, MODELS: MODELS,
    };
  }

  return { create: create };
})();

if (typeof module !== "undefined" && module.exports) module.exports = RooflineModel; // node (tests/test_model_js.py)
