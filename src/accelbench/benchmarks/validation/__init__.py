"""Validation checks: is this stack correct and complete?

Each check is a benchmark of the "validation" family, declared in the registry and run
by the same runner as every measurement (a supervised worker process, or every rank of
a torchrun job); what it concludes is stored as a Measurement with status ok (pass),
failed or skipped, the error it found, its tolerance and its margin (`verdict`).

One module per kind of check:
  numerics     matmul, bmm, addmm, convolution (forward and both backward passes),
               SDPA per backend, sum, softmax, layer norm and transcendental functions
               per precision, against float64 on the same inputs
  amp          mixed-precision training (autocast with GradScaler, bf16 autocast)
  determinism  deterministic algorithms give bit-identical results twice
  torch_compile  torch.compile against eager
  export       torch.export and ONNX round trips
  vision, audio, text, recsys
               torchvision, torchaudio, torchtext and torchrec on the device
  distributed  every collective's result on every rank, and a barrier with a timeout
  memtest      device memory filled with patterns and read back
  burn         sustained GEMM, checked as it runs, throughput per interval
Shared: `verdict` (tolerances, comparisons, verdicts), `modes` (precisions and math
modes), `libraries` (finding an ecosystem library and whether it was built for this
torch).
"""
