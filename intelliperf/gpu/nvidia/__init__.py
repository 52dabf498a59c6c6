"""The NVIDIA backend: CUPTI's tracer and counter pass (through the native profiler), its one table of
metrics, nvidia-smi, the disassembler's listings, and the Nsight Compute readers of old recordings."""
