"""The native profiler: the CUPTI injection library (profiler/native: the timing trace, the counter pass,
the judge's capture and time modes) and the Python that builds it and runs applications under
it (profiler.build, profiler.trace)."""
