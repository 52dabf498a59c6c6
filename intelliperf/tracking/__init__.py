"""Continuous mode: a kernel's timings tracked across commits, and the commits where they moved."""
