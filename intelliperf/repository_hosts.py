"""Which repository URLs may receive git credentials: ``https://<host>/<owner>/<name>[.git][/]`` on a
configured host (``INTELLIPERF_GITHUB_HOSTS``), nothing else.

The service refuses any other URL at submit, and a worker asks the same question before it hands a
token to git, so a job cannot point a credential at a server of its choosing (plain HTTP, SSH, a local
path, an unlisted host). Only the standard library: the engine's install and the worker use it too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["HOSTS_SETTING", "normalized_host", "repository_name", "repository_url_refusal"]

HOSTS_SETTING = "INTELLIPERF_GITHUB_HOSTS"

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST = re.compile(rf"(?P<name>{_LABEL}(?:\.{_LABEL})*)(?::(?P<port>[0-9]{{1,5}}))?")
_SCHEME = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)", re.DOTALL)
_SCP_LIKE = re.compile(r"(?:[^@/:]+@)?(?P<host>[^@/:]+):(?!//)")
_NAME_PART = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_OWNER_NAME = (
    "cannot tell owner/name from this URL (https://host/owner/name or https://host/owner/name.git, "
    "names of letters, digits, '.', '-' and '_', 100 characters at most)"
)


def normalized_host(entry: str) -> str:
    """``host`` or ``host:port``, lower-case, without https's default port; ValueError when ``entry`` is
    anything else (a scheme, a path, credentials, spaces)."""
    host = entry.strip()
    if not host:
        raise ValueError("an empty entry")
    if "://" in host or "/" in host or "@" in host:
        raise ValueError(f"{host!r} is not a host: give host or host:port, without scheme or path")
    normalized = _host(host)
    if normalized is None:
        raise ValueError(f"{host!r} is not a host name, optionally with :port")
    return normalized


def _host(text: str) -> str | None:
    """``text`` as host[:port], lower-case, without https's default port; None when it is not one."""
    match = _HOST.fullmatch(text.lower())
    if match is None or (match["port"] is not None and not 0 < int(match["port"]) < 65536):
        return None
    return match["name"] if match["port"] == "443" else match[0]


def repository_url_refusal(url: str, hosts: Sequence[str]) -> str | None:
    """None when git may be given credentials for ``url``; otherwise why not, naming its host."""
    allowed = {normalized_host(host) for host in hosts}
    listed = ", ".join(sorted(allowed)) or "none"
    scheme_match = _SCHEME.fullmatch(url)
    if scheme_match is None:
        scp = _SCP_LIKE.match(url)
        if scp is not None:
            host = scp["host"].lower()
            return (
                f"SSH addresses such as {url[: scp.end()]}… are refused: clone over "
                f"https://{host}/<owner>/<name>.git, from a host in {HOSTS_SETTING} ({listed})"
            )
        return f"the repository URL must be https://<host>/<owner>/<name>, on a host in {HOSTS_SETTING}"
    scheme, rest = scheme_match["scheme"], scheme_match["rest"]
    authority, _, path = rest.partition("/")
    if scheme.lower() == "https" and scheme != "https":
        return "write the repository URL's scheme in lower case: https://"
    if scheme != "https":
        named = authority.rpartition("@")[2].lower()
        return (
            f"{scheme}:// URLs are refused{f' (host {named})' if named else ''}: git credentials go only "
            f"over https:// to a host in {HOSTS_SETTING} ({listed})"
        )
    if "@" in authority:
        return "the repository URL must not embed credentials; pass a token separately"
    host = _host(authority)
    if host is None:
        return f"the repository URL's host {authority!r} is not a host name, optionally with :port"
    if host not in allowed:
        return (
            f"the repository host {host} is not in {HOSTS_SETTING} ({listed}): the service sends git "
            "credentials only to those hosts"
        )
    if "?" in path or "#" in path:
        return "the repository URL must not have a query or a fragment"
    if path.endswith("/"):
        path = path[:-1]
    if path.endswith(".git"):
        path = path[: -len(".git")]
    parts = path.split("/")
    if len(parts) != 2 or not all(_NAME_PART.fullmatch(part) and part.strip(".") for part in parts):
        return _OWNER_NAME
    return None


_CLONE_URL = re.compile(r"^(?:[a-z+]+://[^/]+/|[^@/]+@[^:/]+:)(?P<path>.+?)(?:\.git)?/?$")


def repository_name(url: str) -> str | None:
    """'owner/name' of a clone URL (https://host/owner/name.git, a GitHub Enterprise path, or
    git@host:owner/name.git), or None when the URL names no such pair (no NUL, no spaces, no '..')."""
    match = _CLONE_URL.match(url.strip())
    if not match:
        return None
    parts = match.group("path").split("/")[-2:]
    if len(parts) < 2 or not all(_NAME_PART.fullmatch(part) and part.strip(".") for part in parts):
        return None
    name = "/".join(parts)
    return name if len(name) <= 200 else None
