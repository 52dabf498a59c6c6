"""Nsight Compute, the counter pass until 2026-11-27: kept out of the product as the reference the CUPTI
counter pass is compared with (benchmarks/counter_pass.py --against-ncu, the GPU tests
tests/test_gpu_counters.py and tests/test_gpu_ncu_pages.py) and to read the pages recorded with it
(tests/fixtures/gpu). The product's replay reads CUPTI recordings only.

pages.py runs ncu and reads its raw page (raw_page.py, a script run with ncu's own report reader);
source.py reads its source pages (of our section, sections/IntelliPerfSource.section); profiles.py
turns the pages into the formulas' profiles; kernel_names.py matches ncu's demangled names.
"""
