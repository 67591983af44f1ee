"""Everything that touches torch, transformers or a GPU: ceilings, decode harnesses, sweeps.

The pure model in ``roofline/`` never imports this package. Modules here import torch and
transformers inside the functions that need them, so importing ``calibrate.runner`` stays cheap.

    ceilings.py      copy/read bandwidth, bf16 GEMM and GEMV at the model's shapes
    hf_eager.py      engine ``hf-eager``: transformers eager decode, dynamic KV cache
    graph_engine.py  engine ``graph``: own decoder, static KV cache, one CUDA graph per batch
    runner.py        run_calibration(): sweeps, OOM boundary, atomic CSV after every point
    gpu_job.py       the one script the GPU machine runs for the committed measurements
"""
