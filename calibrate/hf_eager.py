"""Engine ``hf-eager``: the lesson's setup. transformers eager decode with its default dynamic cache.

The model is built from its published config.json with random bf16 weights directly on the
device (nothing is downloaded). Each point: equal-length random prompts (no padding, attention
mask all ones), a prefill forward and gen-1 decode forwards in a hand-written loop (not
``generate``) so that every step is timed, greedy argmax, ``logits_to_keep=1`` on every forward.

* TTFT = prefill forward + argmax of the first token, synchronised, wall clock.
* Each decode step (mask extension, forward, argmax) is timed between CUDA events placed at step
  boundaries, so the steps tile the decode phase; tpot_s is their MEAN, so
  e2e ~= ttft + (gen-1) * tpot. On the CPU the marks are perf_counter readings.
* Peak memory = torch.cuda.max_memory_allocated over the whole point (warm-up included; it
  includes the weights), after reset_peak_memory_stats.
* host_step_s (raw steps file only): host time to issue each step, no synchronize. When it
  matches the event times, the loop is bound by the CPU (Python + launches), not the GPU.
* Warm-up: one short untimed run (prefill + 3 decode steps) at the same batch before timing.

Bounded points (the runner asks for them at long prompt x large batch, where a prefill costs
seconds and its activations tens of GiB): ``timed_prefill=False`` builds the dynamic cache
directly, one random (batch, kv_heads, prompt, head_dim) key and value tensor per layer (what a
prefill leaves in a ``DynamicCache``), feeds random tokens and times only the decode steps;
``ttft_s`` and ``e2e_s`` are then None and the peak memory holds no prefill activations.
``warmup_prefill=False`` warms up on such a random cache instead of a real prefill.
"""

from __future__ import annotations

import inspect
import time

from roofline.errors import RooflineError

WARMUP_DECODE_STEPS = 3
_DROP_KEYS = ("architectures", "transformers_version", "torch_dtype", "dtype", "auto_map", "_name_or_path")


def build_hf_model(config: dict, device, seed: int = 0):
    """An eval-mode transformers causal LM with random bf16 weights on ``device``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = {k: v for k, v in config.items() if k not in _DROP_KEYS}
    model_type = cfg.pop("model_type")
    hf_config = AutoConfig.for_model(model_type, **cfg)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.bfloat16)
    model.eval()
    with torch.no_grad():  # make sure no parameter is left uninitialised or zero
        for param in model.parameters():
            if param.dim() >= 2:
                param.normal_(0.0, 0.02)
    params = inspect.signature(model.forward).parameters
    if "logits_to_keep" not in params:
        raise RooflineError(
            f"{type(model).__name__}.forward does not accept logits_to_keep (transformers "
            f"{_tf_version()}); the harness needs it to keep only last-position logits"
        )
    return model


def _tf_version() -> str:
    import transformers

    return transformers.__version__


class HFEagerEngine:
    """One model loaded once; ``measure`` runs one (batch, prompt, gen) point."""

    name = "hf-eager"
    kv_cache = "dynamic"

    def __init__(self, config: dict, device: str = "cuda", seed: int = 0):
        import torch

        self.device = torch.device(device)
        self.config = config
        self.seed = seed
        self.model = build_hf_model(config, self.device, seed)
        self.vocab = int(config["vocab_size"])

    def extra_columns(self) -> dict[str, str]:
        return {"attn_implementation": str(getattr(self.model.config, "_attn_implementation", ""))}

    def _prompts(self, batch: int, prompt_tokens: int):
        import torch

        gen = torch.Generator(device=self.device).manual_seed(self.seed + batch)
        return torch.randint(0, self.vocab, (batch, prompt_tokens), device=self.device, generator=gen)

    def random_cache(self, batch: int, prompt_tokens: int):
        """A DynamicCache holding ``prompt_tokens`` random positions per layer, as a prefill leaves it."""
        import torch
        from transformers import DynamicCache

        cfg = self.model.config
        heads = int(cfg.num_attention_heads)
        kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
        try:
            cache = DynamicCache(config=cfg)
        except TypeError:  # older transformers: no config argument
            cache = DynamicCache()
        gen = torch.Generator(device=self.device).manual_seed(self.seed + 2)
        shape = (batch, kv_heads, prompt_tokens, head_dim)
        for layer in range(int(cfg.num_hidden_layers)):
            k = torch.randn(shape, dtype=torch.bfloat16, device=self.device, generator=gen)
            v = torch.randn(shape, dtype=torch.bfloat16, device=self.device, generator=gen)
            cache.update(k, v, layer)
            del k, v
        return cache

    def _run(self, batch: int, prompt_tokens: int, gen_tokens: int, prefill: bool = True) -> dict:
        import torch

        from calibrate.timing import Marks, synchronize

        model, device = self.model, self.device
        ids = self._prompts(batch, prompt_tokens)
        mask = torch.ones_like(ids)
        one = torch.ones(batch, 1, dtype=mask.dtype, device=device)
        marks = Marks(device, gen_tokens)
        with torch.inference_mode():
            if prefill:
                synchronize(device)
                t0 = time.perf_counter()
                out = model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1)
                tok = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
                past = out.past_key_values
                del out
                synchronize(device)
                ttft_s = time.perf_counter() - t0
            else:
                past = self.random_cache(batch, prompt_tokens)
                tok = ids[:, -1:].clone()
                ttft_s = None
                synchronize(device)
                t0 = time.perf_counter()
            del ids
            marks.mark()
            host = [time.perf_counter()]
            for _ in range(gen_tokens - 1):
                mask = torch.cat([mask, one], dim=1)
                out = model(
                    input_ids=tok, attention_mask=mask, past_key_values=past,
                    use_cache=True, logits_to_keep=1,
                )
                tok = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
                past = out.past_key_values
                del out
                marks.mark()
                host.append(time.perf_counter())
            synchronize(device)
            e2e_s = time.perf_counter() - t0 if prefill else None
        step_s = marks.consecutive()
        del past, tok, mask
        host_step_s = [b - a for a, b in zip(host, host[1:])]
        return {"ttft_s": ttft_s, "step_s": step_s, "e2e_s": e2e_s, "host_step_s": host_step_s}

    def measure(self, batch: int, prompt_tokens: int, gen_tokens: int,
                timed_prefill: bool = True, warmup_prefill: bool = True) -> dict:
        """One point: warm-up run, then the timed run (see the module doc for the two switches)."""
        from calibrate.timing import peak_gib, reset_peak, synchronize

        synchronize(self.device)
        reset_peak(self.device)
        warm_gen = min(gen_tokens, WARMUP_DECODE_STEPS + 1)
        self._run(batch, prompt_tokens, warm_gen, prefill=warmup_prefill and timed_prefill)  # warm-up
        result = self._run(batch, prompt_tokens, gen_tokens, prefill=timed_prefill)
        result["peak_mem_gib"], result["peak_reserved_gib"] = peak_gib(self.device)
        return result

    def close(self) -> None:
        self.model = None
