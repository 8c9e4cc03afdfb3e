"""Training at scale: FSDP2, tensor and pipeline parallelism, a 2-D mesh, and scaling
efficiency across ranks and nodes."""
