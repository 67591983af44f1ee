/* Static batching's waste (roofline.batching) and the two servers (roofline.serving), ported for
 * the page on top of RooflineModel's pass model (passS). Kept apart from model.js so it can follow
 * roofline/serving.py on its own; tests/test_model_js.py holds it equal to the package under node.
 * The continuous server is roofline.api.simulate's default one: roofline.scheduler's decode-first
 * schedule without a token budget (no chunked prefill), a KV pool of blocks sized from the card's
 * memory (roofline.kvpool.kv_pool; roofline.servers.build's defaults), FIFO admission by free
 * blocks, preemption by recompute of the latest admitted, rejection of requests that can never
 * fit, each iteration one pass of the step model (roofline.pass_costs.FusedCost). Every request
 * of the page's stream arrives at t = 0. The simulators price passes without the windows' cap, as
 * serving.py does (PassWork's window counts left None). Base units: tokens, seconds, bytes. */
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

    // numpy.percentile, linear; null over no values (roofline.serving.latency_percentiles)
    function percentile(values, q) {
      if (!values.length) return null;
      var v = values.slice().sort(function (a, b) { return a - b; });
      var pos = (q / 100) * (v.length - 1), lo = Math.floor(pos), hi = Math.ceil(pos);
      return v[lo] + (v[hi] - v[lo]) * (pos - lo);
    }

    // roofline.serving.tpot_of: (finish - first token) / (gen - 1); NaN for one token
    function tpotOf(first, finish, gens) {
      return gens.map(function (g, i) { return g > 1 ? (finish[i] - first[i]) / Math.max(g - 1.0, 1.0) : NaN; });
    }

    // roofline.serving.Served.summary (no SLO): percentiles over the served requests (a rejected
    // one has NaN times), TPOT over those with more than one token; the continuous server's counters
    function summary(out) {
      var served = [];
      out.e2e_s.forEach(function (e, i) { if (!isNaN(e)) served.push(i); });
      function finite(a) { return served.map(function (i) { return a[i]; }).filter(function (x) { return isFinite(x); }); }
      var slotSteps = out.slots * out.passes, steps = slotSteps || NaN;
      var s = { requests: out.e2e_s.length, generated_tokens: out.useful, makespan_s: out.makespan_s,
                throughput_tok_s: out.makespan_s > 0 ? out.useful / out.makespan_s : Infinity,
                mean_occupancy: out.useful / steps, waste_fraction: (slotSteps - out.useful) / steps,
                idle_slot_steps: slotSteps - out.useful, slot_steps: slotSteps, passes: out.passes };
      var ttft = finite(out.ttft_s), e2e = finite(out.e2e_s), tpot = finite(out.tpot_s);
      [50, 90, 99].forEach(function (q) {
        s["ttft_p" + q + "_s"] = percentile(ttft, q);
        s["e2e_p" + q + "_s"] = percentile(e2e, q);
        s["tpot_p" + q + "_s"] = percentile(tpot, q);
      });
      Object.assign(s, out.extra || {});
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
      return summary({ ttft_s: ttft, e2e_s: finish.slice(), finish_s: finish, tpot_s: tpotOf(ttft, finish, gens),
                       slots: slots, passes: passes, useful: useful, makespan_s: n ? Math.max.apply(null, finish) : 0.0 });
    }

    // ---- the continuous server's KV pool (roofline.kvpool) ----
    // an error the page shows in place of the continuous server (RooflineError: message, field)
    function serverError(message, field) {
      var e = new Error(message);
      e.field = field;
      return e;
    }

    // Python's float floor division a // b (CPython's float_floor_div: fmod, then rounded)
    function floorDiv(a, b) {
      var mod = a % b, div = (a - mod) / b;
      if (mod && (b < 0) !== (mod < 0)) div -= 1.0;
      if (!div) return 0.0;
      var floor = Math.floor(div);
      return div - floor > 0.5 ? floor + 1.0 : floor;
    }
    // ceil(x / b) and Python's x % b (never negative) for whole numbers
    function cdiv(x, b) { var r = x % b; return (x - r) / b + (r > 0 ? 1 : 0); }
    function pmod(x, b) { var r = x % b; return r < 0 ? r + b : r + 0; }

    // Python's f"{x:g}" (six significant digits; ties, which Python rounds to even, aside)
    function formatG(x) {
      if (x === 0) return "0";
      var e = Number(x.toExponential(5).split("e")[1]);
      if (e < -4 || e >= 6) {
        var parts = x.toExponential(5).split("e"), exp = Number(parts[1]);
        return parts[0].replace(/\.?0+$/, "") + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
      }
      var s = x.toFixed(Math.max(0, 5 - e));
      return s.indexOf(".") >= 0 ? s.replace(/\.?0+$/, "") : s;
    }

    // roofline.kvpool.kv_pool from memory: gpu_memory_utilization x card memory - weights -
    // workspace - activations (one profiling prefill's, roofline.memory.peak_memory) - engine
    // reserve, in blocks of block_size x KV bytes per token (one GPU's share)
    function kvPool(m, util) {
      var S = RM.DATA.server, B = S.block_size, perToken = m.kvb, GiB = RM.DATA.gib;
      var profile = RM.peakMemory(Object.assign({}, m, { prompt: S.profile_tokens, gen: 1, kvCache: "dynamic", logits: "last" }), 1);
      var weights = profile.weights_bytes, workspace = profile.workspace_bytes;
      var activations = profile.activations_bytes + profile.logits_bytes;
      var memory = m.card.memory_bytes, reserve = S.engine_reserve_bytes;
      var free = util * memory - weights - workspace - activations - reserve;
      var blocks = free > 0 ? floorDiv(free, B * perToken) : 0;
      if (blocks < 1) {
        throw serverError("no room for a KV cache: " + formatG(util) + " x " + (memory / GiB).toFixed(1) + " GiB = "
          + (util * memory / GiB).toFixed(2) + " GiB, of which the weights take " + (weights / GiB).toFixed(2)
          + " GiB, workspace and activations " + ((workspace + activations) / GiB).toFixed(2) + " GiB"
          + (reserve ? ", the engine reserve " + (reserve / GiB).toFixed(2) + " GiB" : "")
          + " (raise it, use a smaller model or dtype, more tensor parallelism, or give kv_capacity_tokens)",
          "gpu_memory_utilization");
      }
      return { num_blocks: blocks, block_size: B, capacity_tokens: blocks * B, kv_bytes_per_token: perToken,
               memory_bytes: memory, gpu_memory_utilization: util, weights_bytes: weights, workspace_bytes: workspace,
               activations_bytes: activations, engine_reserve_bytes: reserve };
    }

    // ---- roofline.scheduler, decode-first without a token budget, every request at t = 0 ----
    // Sequences in ``running`` (a Map: admission order, as Python's dict); a decoding sequence's
    // KV = base + D (D: decode steps so far); counts[r]: decoding sequences with (-base) % B == r,
    // the ones that take a block at a step with D % B == r; ends: finish step -> sequences (stale
    // entries of preempted ones skipped by finStep, as Python's heap).
    function serveContinuous(m, prompts, gens, slots, pool, maxModelLen) {
      var n = gens.length, B = pool.block_size, S = slots;
      var first = new Array(n).fill(NaN), finish = new Array(n).fill(NaN), pre = new Array(n).fill(0);
      var rejected = new Array(n), order = [];
      for (var i = 0; i < n; i++) { // roofline.scheduler.rejected_mask
        var most = prompts[i] + gens[i] - 1;
        rejected[i] = cdiv(most, B) > pool.num_blocks || (maxModelLen !== null && most > maxModelLen);
        if (!rejected[i]) order.push(i);
      }
      var k = new Array(n).fill(0), base = new Array(n).fill(0), finStep = new Array(n).fill(-1);
      var counts = new Array(B).fill(0), ends = new Map(), running = new Map(), requeue = [];
      var free = pool.num_blocks, D = 0, sumBase = 0, t = 0.0, nxt = 0, total = order.length;
      var iterations = 0, prefills = 0, decodes = 0, maxRunning = 0, tokensOut = 0;
      function latest() { var last = -1; running.forEach(function (_, h) { last = h; }); return last; }
      while (nxt < total || requeue.length || running.size) {
        // 1. the running sequences' blocks; preempt the latest admitted while they do not fit
        var nDec = running.size, needy = nDec ? counts[D % B] : 0, preempted = false;
        if (needy > free) {
          preempted = true;
          var inOrder = Array.from(running.keys());
          for (var a = 0; a < inOrder.length; a++) {
            var h = inOrder[a];
            if (!running.has(h)) break;
            var need = (base[h] + D) % B === 0 ? 1 : 0;
            while (need > free && running.has(h)) {
              var v = latest(), bv = base[v], kv = bv + D;
              running.delete(v);
              free += cdiv(kv, B);
              counts[pmod(-bv, B)] -= 1;
              sumBase -= bv;
              k[v] = kv - prompts[v] + 1;
              finStep[v] = -1;
              pre[v] += 1;
              requeue.push(v);
            }
            if (!running.has(h)) break;
            free -= need;
          }
          nDec = running.size;
        } else {
          free -= needy;
        }
        // 2. admission, FIFO without skipping (the preempted first), only when nobody was preempted
        var admitted = [];
        if (!preempted) {
          while (running.size < S) {
            var hq;
            if (requeue.length) hq = requeue[requeue.length - 1];
            else if (nxt < total) hq = order[nxt];
            else break;
            var nn = prompts[hq] + k[hq], needq = cdiv(nn, B);
            if (needq > free) break;
            if (requeue.length) requeue.pop(); else nxt += 1;
            free -= needq;
            running.set(hq, true);
            admitted.push([hq, nn]);
          }
        }
        // 3. one pass: the decodes and the newcomers' whole prefills
        iterations += 1;
        if (running.size > maxRunning) maxRunning = running.size;
        if (admitted.length) {
          prefills += 1;
          var tokens = 0, pairs = 0.0;
          admitted.forEach(function (x) { tokens += x[1]; pairs += x[1] * 0 + x[1] * (x[1] + 1) / 2.0; });
          var kvRead = nDec ? sumBase + nDec * (D + 1) : 0.0;
          t += passS(m, work(nDec, kvRead, tokens, pairs, admitted.length));
        } else {
          t += passS(m, decodeWork(nDec, sumBase + nDec * (D + 1)));
        }
        if (nDec) {
          decodes += 1;
          tokensOut += nDec;
          D += 1;
          var done = ends.get(D - 1);
          if (done) {
            ends.delete(D - 1);
            done.forEach(function (h) {
              if (finStep[h] !== D - 1) return; // preempted since
              finStep[h] = -1;
              finish[h] = t;
              var b = base[h];
              free += cdiv(b + D, B);
              running.delete(h);
              counts[pmod(-b, B)] -= 1;
              sumBase -= b;
            });
          }
        }
        admitted.forEach(function (x) {
          var h = x[0], cached = x[1], kh = k[h] + 1;
          k[h] = kh;
          tokensOut += 1;
          if (kh === 1) first[h] = t;
          if (kh === gens[h]) {
            finish[h] = t;
            free += cdiv(cached, B);
            running.delete(h);
            return;
          }
          var b = cached - D;
          base[h] = b;
          counts[pmod(-b, B)] += 1;
          sumBase += b;
          var fs = D + gens[h] - kh - 1;
          finStep[h] = fs;
          if (!ends.has(fs)) ends.set(fs, []);
          ends.get(fs).push(h);
        });
      }
      var makespan = 0.0, preemptions = 0, preemptedRequests = 0;
      for (i = 0; i < n; i++) {
        if (!rejected[i] && finish[i] > makespan) makespan = finish[i];
        preemptions += pre[i];
        if (pre[i] > 0) preemptedRequests += 1;
      }
      return summary({ ttft_s: first, e2e_s: finish.slice(), finish_s: finish, tpot_s: tpotOf(first, finish, gens),
                       slots: slots, passes: iterations, useful: tokensOut, makespan_s: makespan,
                       preemptions: pre, rejected: rejected, pool: pool,
                       extra: { preemptions: preemptions, preempted_requests: preemptedRequests, max_running: maxRunning,
                                rejected: n - total, prefill_iterations: prefills, decode_iterations: decodes,
                                kv_capacity_tokens: pool.capacity_tokens } });
    }

    // roofline.api.simulate's continuous server for ``s`` (the KV pool from the card's memory at
    // s.gpu_memory_utilization, max_model_len the model's max_position_embeddings); throws an
    // error with a field (gpu_memory_utilization, max_model_len) when there is no pool or every
    // request is rejected (roofline.servers.BuiltServer.nothing_served), as Python refuses them
    function simulateContinuous(m, prompts, gens, slots, util) {
      var u = Number(util);
      if (!(u > 0 && u <= 1)) {
        throw serverError("must be a fraction of the card's memory in (0, 1], not " + util, "gpu_memory_utilization");
      }
      var pool = kvPool(m, u), maxModelLen = m.model.max_position_embeddings;
      if (maxModelLen === undefined) maxModelLen = null;
      var out = serveContinuous(m, prompts, gens, slots, pool, maxModelLen);
      if (gens.length && out.summary.rejected === gens.length) {
        var need = Infinity;
        for (var i = 0; i < gens.length; i++) need = Math.min(need, prompts[i] + gens[i] - 1);
        if (maxModelLen !== null && need > maxModelLen) {
          throw serverError("every request is rejected: the shortest needs " + RM.thousands(need) + " tokens, more than "
                            + "max_model_len " + RM.thousands(maxModelLen), "max_model_len");
        }
        throw serverError("every request is rejected: the shortest needs " + RM.thousands(need) + " tokens of KV, the pool "
                          + "holds " + RM.thousands(pool.capacity_tokens), "gpu_memory_utilization");
      }
      return out;
    }

    // The page's stream (the mix repeated to stream_count, every prompt the scenario's, all at
    // t = 0) served both ways; serve_continuous is {error, field} where Python's simulate refuses
    // the continuous server (no KV pool, every request rejected); other errors are thrown.
    function serveStream(m, s) {
      var stream = mixStream(s.mix, Number(s.stream_count));
      var prompts = stream.gens.map(function () { return m.prompt; }), batch = Number(s.batch);
      var out = { stream: { gens: stream.gens, prompt_tokens: m.prompt },
                  serve_static: serveStatic(m, prompts, stream.gens, batch, s.return_policy) };
      try {
        out.serve_continuous = simulateContinuous(m, prompts, stream.gens, batch, s.gpu_memory_utilization);
      } catch (e) {
        if (!e.field) throw e;
        out.serve_continuous = { error: e.message, field: e.field };
      }
      return out;
    }

    // The serving part of the parity result for one setting: static waste (roofline waste) and the
    // same stream served both ways (roofline simulate), every request at t = 0.
    function compute(settings) {
      var s = Object.assign({}, RM.DATA.initial, settings), m = RM.scenario(s);
      var w = mixWaste(m, s.mix, Number(s.batch));
      delete w.batch_list;
      var served = serveStream(m, s), ct = served.serve_continuous;
      return { waste: w, serve_static: served.serve_static.summary,
               serve_continuous: ct.error ? ct : ct.summary };
    }

    return { compute: compute, parseMix: parseMix, interleave: interleave, mixStream: mixStream,
             tokenAccounting: tokenAccounting, mixWaste: mixWaste, staticBatchTimes: staticBatchTimes,
             serveStatic: serveStatic, serveContinuous: serveContinuous, kvPool: kvPool,
             simulateContinuous: simulateContinuous, serveStream: serveStream, formatG: formatG };
  }

  return { create: create };
})();

if (typeof module !== "undefined" && module.exports) module.exports = RooflineServing; // node (tests/test_model_js.py)
