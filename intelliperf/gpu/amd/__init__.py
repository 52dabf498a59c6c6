"""The AMD backend: rocprofv3's kernel trace and counters, its one table of counters, amd-smi."""
