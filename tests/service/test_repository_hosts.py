"""Git credentials go only to configured hosts: a job's repository must be https://<host>/<owner>/<name>
on a host in INTELLIPERF_GITHUB_HOSTS. The rule at its edges, the setting, and a real attack: a job that
points its repository (and the GitHub token it sends) at a server of its own is refused at submit,
nothing is recorded, and that server is never contacted."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from pydantic import ValidationError

from intelliperf.jobqueue import QueueSettings
from intelliperf.repository_hosts import repository_url_refusal
from service.db.session import Database
from service.settings import ServiceSettings
from tests.service.conftest import serve
from tests.service.test_api_bad_input import counts, errors, locs, post_spec, upload

GHE = "ghe.corp.example:8443"
HOSTS = ["github.com"]

# (URL, hosts, None when accepted, else words of the refusal)
URLS: list[tuple[str, list[str], str | None]] = [
    ("https://github.com/acme/kernels.git", HOSTS, None),
    ("https://github.com/acme/kernels", HOSTS, None),
    ("https://github.com/acme/kernels.git/", HOSTS, None),
    ("https://GitHub.COM/acme/kernels.git", HOSTS, None),
    ("https://github.com:443/acme/kernels.git", HOSTS, None),
    ("https://github.com/acme/kernels.git", ["GitHub.com"], None),
    (f"https://{GHE}/acme/kernels.git", [*HOSTS, GHE], None),
    (f"https://{GHE.upper()}/acme/kernels.git", [*HOSTS, GHE], None),
    (f"https://{GHE}/acme/kernels.git", HOSTS, f"repository host {GHE} is not in INTELLIPERF_GITHUB_HOSTS"),
    ("https://ghe.corp.example/acme/kernels.git", [GHE], "host ghe.corp.example is not in"),
    ("https://ghe.corp.example:9443/acme/kernels.git", [GHE], "host ghe.corp.example:9443 is not in"),
    ("https://github.com:8443/acme/kernels.git", HOSTS, "host github.com:8443 is not in"),
    ("https://github.com.evil.example/acme/kernels.git", HOSTS, "host github.com.evil.example is not in"),
    ("https://evil.example/github.com/acme/kernels.git", HOSTS, "host evil.example is not in"),
    ("http://github.com/acme/kernels.git", HOSTS, "http:// URLs are refused (host github.com)"),
    ("HTTPS://github.com/acme/kernels.git", HOSTS, "scheme in lower case"),
    ("git@github.com:acme/kernels.git", HOSTS, "SSH addresses such as git@github.com:"),
    ("github.com:acme/kernels.git", HOSTS, "SSH addresses"),
    ("ssh://git@github.com/acme/kernels.git", HOSTS, "ssh:// URLs are refused (host github.com)"),
    ("file:///srv/git/acme/kernels.git", HOSTS, "file:// URLs are refused"),
    ("/srv/git/acme/kernels.git", HOSTS, "must be https://<host>/<owner>/<name>"),
    ("https://user:secret@github.com/acme/kernels.git", HOSTS, "must not embed credentials"),
    ("https://github.com@evil.example/acme/kernels.git", HOSTS, "must not embed credentials"),
    ("https://github.com/kernels", HOSTS, "cannot tell owner/name"),
    ("https://github.com/acme/team/kernels.git", HOSTS, "cannot tell owner/name"),
    ("https://github.com/acme/../kernels", HOSTS, "cannot tell owner/name"),
    ("https://github.com/acme/ker nels", HOSTS, "cannot tell owner/name"),
    ("https://github.com/acme/kernels\n", HOSTS, "cannot tell owner/name"),
    ("https://github.com\n/acme/kernels", HOSTS, "is not a host name"),
    ("https://github.com/acme/kernels?ref=x", HOSTS, "query or a fragment"),
    ("https:///acme/kernels", HOSTS, "is not a host name"),
]


@pytest.mark.parametrize(("url", "hosts", "refusal"), URLS)
def test_the_rule_at_its_edges(url: str, hosts: list[str], refusal: str | None) -> None:
    got = repository_url_refusal(url, hosts)
    if refusal is None:
        assert got is None
    else:
        assert got is not None and refusal in got, got


def test_the_setting_is_a_comma_separated_list_of_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    assert QueueSettings().github_hosts == ["github.com"]
    monkeypatch.setenv("INTELLIPERF_GITHUB_HOSTS", f" GitHub.com , {GHE.upper()}")
    assert QueueSettings().github_hosts == ["github.com", GHE]
    for bad, words in [
        ("github.com,,x.example", "an empty entry"),
        ("github.com,", "an empty entry"),
        ("https://github.com", "without scheme or path"),
        ("github.com/acme", "without scheme or path"),
        ("user@github.com", "without scheme or path"),
        ("git hub.com", "not a host name"),
        ("github.com:99999", "not a host name"),
    ]:
        monkeypatch.setenv("INTELLIPERF_GITHUB_HOSTS", bad)
        with pytest.raises(ValidationError, match="INTELLIPERF_GITHUB_HOSTS") as refused:
            QueueSettings()
        assert words in str(refused.value), (bad, str(refused.value))


class CountingServer:
    """An HTTP server on 127.0.0.1 that answers every request 200 and counts them."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                owner.requests.append(f"{self.command} {self.path}")
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> CountingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def attacker() -> Iterator[CountingServer]:
    with CountingServer() as server:
        httpx.get(f"http://{server.host}/control", timeout=5)  # it does count what reaches it
        assert server.requests == ["GET /control"]
        yield server


def test_a_repository_on_a_server_of_the_submitters_choosing_is_refused_and_never_contacted(
    settings_for: Callable[..., ServiceSettings], database_url: str, db: Database, attacker: CountingServer
) -> None:
    token = {"X-IntelliPerf-GitHub-Token": "ghp_" + "s" * 36}
    settings = settings_for(database_url, secret_key="hosts-test-key")
    with serve(settings) as live, live.client() as client:
        for url in (f"http://{attacker.host}/acme/kernels.git", f"https://{attacker.host}/acme/kernels.git"):
            spec = {"repository": {"url": url}, "applications": [{"command": "./app"}]}
            response = post_spec(client, spec, headers=token)
            assert response.status_code == 422, response.text
            assert locs(response) == [["body", "repository", "url"]]
            message = errors(response)[0]["msg"]
            assert attacker.host in message and "INTELLIPERF_GITHUB_HOSTS" in message, message

            response = upload(client, spec=spec, headers=token)
            assert response.status_code == 422, response.text
            assert locs(response) == [["body", "spec", "repository", "url"]]
            assert attacker.host in errors(response)[0]["msg"]
        assert counts(db) == (0, 0, 0, 0)
        assert live.server.config.app.state.archive_checks.started == 0  # refused before the archive
    assert attacker.requests == ["GET /control"]


def test_a_host_the_operator_adds_is_accepted(
    settings_for: Callable[..., ServiceSettings], database_url: str, db: Database
) -> None:
    with serve(settings_for(database_url, github_hosts=["github.com", GHE])) as live, live.client() as client:
        spec = {
            "repository": {"url": f"https://{GHE.upper()}/acme/kernels.git"},
            "applications": [{"command": "./app"}],
        }
        response = post_spec(client, spec)
        assert response.status_code == 201, response.text
        assert response.json()["repository"] == "acme/kernels"
        other = {**spec, "repository": {"url": "https://gitlab.com/acme/kernels.git"}}
        response = post_spec(client, other)
        assert response.status_code == 422 and "gitlab.com" in errors(response)[0]["msg"]
        assert "(ghe.corp.example:8443, github.com)" in errors(response)[0]["msg"]
    assert counts(db)[0] == 1
