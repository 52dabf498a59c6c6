"""The GitHub Action's client: reads the Action's inputs, posts the job to an IntelliPerf service,
streams its events into the log, and writes the step summary and outputs (see action.yml).

Run as ``python -m intelliperf.action`` or ``intelliperf-action``. It needs the core and httpx only
(``pip install 'intelliperf[action]'``); no service code.
"""

from __future__ import annotations

from intelliperf.action._main import EXIT_INPUT, EXIT_JOB, EXIT_OK, EXIT_SERVICE, EXIT_TIMEOUT, main, run

__all__ = ["EXIT_INPUT", "EXIT_JOB", "EXIT_OK", "EXIT_SERVICE", "EXIT_TIMEOUT", "main", "run"]
