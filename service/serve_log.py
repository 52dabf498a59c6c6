"""Where `intelliperf serve` writes: its log file in the data folder, and what reaches the console.

Everything the service logs at INFO goes to ``serve.log`` in the data folder (kept to 10 MiB, with three
older ones, ``serve.log.1`` the newest), and so do its local workers' warnings and errors
(worker.cli.start_local_workers). The routine calls are not logged there: every worker's heartbeat every
few seconds, its running job's cancellation check every second, a health check's probe; answered, they
say nothing.

The console shows one line per job event (service.job_log: queued, started on a worker, each stage, the
outcome) and, in one line that points to the log, anything logged as an error. With ``verbose`` it shows
everything the log file gets, and the routine calls too (what `serve` printed before it had a log file).
"""

from __future__ import annotations

import logging
import logging.handlers
import re
import sys
from pathlib import Path

from service.job_log import LOGGER as JOBS_LOGGER

__all__ = ["LOG_FILE", "configure"]

LOG_FILE = "serve.log"
LOG_FILE_BYTES = 10 * 2**20
LOG_FILE_BACKUPS = 3
FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_ROUTINE = re.compile(r"(?:/v1/worker/(?:workers/[^/?]+|jobs/[^/?]+/cancel)|/healthz|/readyz)(?:\?.*)?")
"""A worker's heartbeat (PUT), its running job's cancellation check (GET, every second), a health check."""


class RoutineCalls(logging.Filter):
    """uvicorn's access log without the routine calls that were answered."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            # client, method, path with query, HTTP version, status
            _client, method, path, _version, status = args
            if method in ("GET", "PUT") and isinstance(status, int) and status < 400:
                return _ROUTINE.fullmatch(str(path)) is None
        return True


class ConsoleFormatter(logging.Formatter):
    """A record in one line: the time and the message's first line; an error says where its details are."""

    def __init__(self, log_file: Path) -> None:
        super().__init__(datefmt="%H:%M:%S")
        self.log_file = log_file

    def format(self, record: logging.LogRecord) -> str:
        message = (record.getMessage().strip().splitlines() or [""])[0]
        if record.levelno >= logging.ERROR:
            message = f"error: {message} (details in {self.log_file})"
        return f"{self.formatTime(record, self.datefmt)} {message}"


def _job_event_or_error(record: logging.LogRecord) -> bool:
    return record.name == JOBS_LOGGER or record.levelno >= logging.ERROR


def configure(data_dir: Path, *, verbose: bool) -> Path:
    """Log to ``data_dir``/serve.log and to the console as above; returns the log file's path."""
    log_file = data_dir / LOG_FILE
    log_file.touch(mode=0o600)
    to_file = logging.handlers.RotatingFileHandler(
        log_file, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8"
    )
    to_file.setFormatter(logging.Formatter(FILE_FORMAT))
    to_file.addFilter(RoutineCalls())
    to_console = logging.StreamHandler(sys.stderr)
    if verbose:
        to_console.setFormatter(logging.Formatter(FILE_FORMAT))
    else:
        to_console.setFormatter(ConsoleFormatter(log_file))
        to_console.addFilter(_job_event_or_error)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(to_file)
    root.addHandler(to_console)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)  # a library's warning is a log record too: in the file, not on the console
    return log_file
