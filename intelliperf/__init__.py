"""IntelliPerf: automated GPU performance engineering."""

__version__ = "0.1.0"
