"""The NVIDIA backend: CUPTI's tracer and counter pass (through the native profiler), its one table of
metrics, nvidia-smi and the disassembler's listings. (Nsight Compute, the counter pass until 2026-11-27, is
the reference in benchmarks/ncu.)"""
