"""The static-batching lesson's section-2 table (Qwen2.5-1.5B-Instruct, bf16, RTX 3060, HF
transformers eager decode, prompt 128, gen 128): published measurements, used as golden values.
Source: ../shared/spec/static-batching-lesson.md, section 2."""

# batch, TTFT (s), TPOT (ms), per request (tok/s), throughput (tok/s), peak VRAM (GiB),
# estimated intensity (FLOP/byte), % of compute ceiling, % of bandwidth ceiling
LESSON_ROWS = [
    (1, 0.044, 20.57, 48.6, 48.6, 2.90, 1.0, 0.54, 47.2),
    (2, 0.040, 18.14, 55.1, 110.3, 2.91, 2.0, 1.23, 53.7),
    (4, 0.071, 18.51, 54.0, 216.1, 2.93, 4.0, 2.41, 52.8),
    (8, 0.133, 18.07, 55.4, 442.8, 2.98, 7.9, 4.95, 54.5),
    (16, 0.285, 19.28, 51.9, 830.0, 3.07, 15.6, 9.27, 51.8),
    (32, 0.511, 20.83, 48.0, 1536.1, 3.25, 30.3, 17.16, 49.2),
    (64, 1.007, 22.59, 44.3, 2832.9, 3.61, 57.4, 31.66, 47.8),
    (128, 2.010, 33.06, 30.3, 3872.3, 4.33, 104.2, 43.27, 36.0),
]
BATCHES = [r[0] for r in LESSON_ROWS]
