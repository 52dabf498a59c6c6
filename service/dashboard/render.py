"""Jinja2 with autoescaping everywhere, the filters the pages use, and the headers every page gets."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markdown_it import MarkdownIt
from markupsafe import Markup

from intelliperf.summary import format_number

__all__ = ["STATIC", "TEMPLATES", "render", "static_version"]

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# No inline script or style anywhere: a string that slipped past escaping still could not run.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def age(then: datetime | None, now: datetime) -> str:
    """'42 s', '5 min', '3 h 10 min', '2 d': how long ago, compact."""
    if then is None:
        return ""
    return duration((now - then).total_seconds())


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s" if s < 600 else f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def span(start: datetime | None, end: datetime | None, now: datetime) -> str:
    """A run's duration: start to end, or to now while it runs."""
    if start is None:
        return ""
    return duration(((end or now) - start).total_seconds())


def nanoseconds(ns: float | None) -> str:
    if ns is None:
        return ""
    if ns >= 1e9:
        return f"{ns / 1e9:.3g} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3g} µs"
    return f"{ns:.3g} ns"


def gib(count: int | None) -> str:
    return "" if count is None else f"{count / 2**30:.0f} GiB"


def percent(fraction: float | None) -> str:
    return "" if fraction is None else f"{fraction * 100:.1f} %"


def number(value: float | None) -> str:
    """As the summary the page embeds writes it (intelliperf.summary.format_number)."""
    return "" if value is None else format_number(value)


def timestamp(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")


# The summary's footer is <sub>...</sub>: these bare tags (no attributes) are given back their meaning.
_HARMLESS_TAGS = ("sub", "sup")


def markdown(text: str | None) -> Markup:
    """Markdown to HTML with raw HTML off (shown as text) and unsafe links (javascript:, ...) refused."""
    html = _MARKDOWN.render(text or "")
    for tag in _HARMLESS_TAGS:
        html = html.replace(f"&lt;{tag}&gt;", f"<{tag}>").replace(f"&lt;/{tag}&gt;", f"</{tag}>")
    return Markup(html)


def diff_lines(diff: str | None) -> list[tuple[str, str]]:
    """(css class, line) for a unified diff; the template escapes the text."""
    lines = []
    for line in (diff or "").splitlines():
        if line.startswith(("+++", "---")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        lines.append((kind, line))
    return lines


def application(spec: dict[str, Any]) -> str:
    """The first application's name or command line, and how many more the job has."""
    apps = spec.get("applications") or []
    if not apps:
        return ""
    first = apps[0]
    label = first.get("name") or " ".join(str(arg) for arg in first.get("command") or [])
    return label + (f" (+{len(apps) - 1} more)" if len(apps) > 1 else "")


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@cache
def static_version() -> str:
    """Changes whenever a static file does, so browsers never keep a stale script or style."""
    digest = hashlib.sha256()
    for path in sorted(STATIC.iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        duration=duration,
        ns=nanoseconds,
        gib=gib,
        percent=percent,
        number=number,
        timestamp=timestamp,
        markdown=markdown,
        pretty_json=pretty_json,
    )
    env.globals.update(
        application=application, age=age, span=span, diff_lines=diff_lines, static_version=static_version
    )
    return env


def render(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    html = environment().get_template(template).render(**context)
    return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)
