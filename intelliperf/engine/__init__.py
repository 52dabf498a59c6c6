"""The engine: the closed loop from build to report."""
