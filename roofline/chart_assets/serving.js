/* Static batching's waste (roofline.batching) and the two servers (roofline.serving), ported for
 * the page on top of RooflineModel's pass model (passS). Kept apart from model.js so it can follow
 * roofline/serving.py on its own; tests/test_model_js.py holds it equal to the package under node.
 * The simulators price passes without the windows' cap, as serving.py does (PassWork's window
 * counts left None). Base units: tokens, seconds. */
"use strict";

var RooflineServing = (function () {
  function create(RM) {
    var passS = RM.passS, work = RM.work, decodeWork = RM.decodeWork, prefillWork = RM.prefillWork;

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

    // roofline.serving.Served.summary
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

    // The serving part of the parity result for one setting: static waste (roofline waste) and the
    // same stream served both ways (roofline simulate), every request at t = 0.
    function compute(settings) {
      var s = Object.assign({}, RM.DATA.initial, settings), m = RM.scenario(s);
      var w = mixWaste(m, s.mix, Number(s.batch));
      delete w.batch_list;
      var stream = mixStream(s.mix, Number(s.stream_count));
      var prompts = stream.gens.map(function () { return m.prompt; });
      return { waste: w, serve_static: serveStatic(m, prompts, stream.gens, Number(s.batch), s.return_policy).summary,
               serve_continuous: serveContinuous(m, prompts, stream.gens, Number(s.batch)).summary };
    }

    return { compute: compute, parseMix: parseMix, interleave: interleave, mixStream: mixStream,
             tokenAccounting: tokenAccounting, mixWaste: mixWaste, staticBatchTimes: staticBatchTimes,
             serveStatic: serveStatic, serveContinuous: serveContinuous };
  }

  return { create: create };
})();

if (typeof module !== "undefined" && module.exports) module.exports = RooflineServing; // node (tests/test_model_js.py)
