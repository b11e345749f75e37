"""tests/support/waiting.py: a service that is still starting may answer anything; only the
deadline or its death ends the wait, and the error says what was awaited."""

from __future__ import annotations

import http.server
import threading

import pytest

from tests.support import waiting


class _StartingUI(http.server.BaseHTTPRequestHandler):
    """Answers as a starting Spark master did: an error, then its HTML page, then JSON."""

    answers = [
        (503, "text/plain", b"starting"),
        (200, "text/html", b"<html><body>Spark Master</body></html>"),
        (200, "application/json", b'{"aliveworkers": 1}'),
        (200, "application/json", b'{"aliveworkers": 2}'),
    ]

    def do_GET(self):
        calls = self.server.calls  # type: ignore[attr-defined]
        status, kind, body = self.answers[min(calls, len(self.answers) - 1)]
        self.server.calls = calls + 1  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def starting_ui():
    server = http.server.HTTPServer(("127.0.0.1", 0), _StartingUI)
    server.calls = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_port}/json/"
    server.shutdown()
    server.server_close()


def test_an_error_and_an_html_page_are_not_ready_answers(starting_ui):
    server, url = starting_ui

    def two_workers():
        status = waiting.get_json(url)
        return status if status["aliveworkers"] == 2 else None

    assert waiting.wait_until("two workers", two_workers, timeout=20, interval=0.01) == {
        "aliveworkers": 2
    }
    assert server.calls == 4


def test_giving_up_names_what_was_awaited_and_the_last_answer(starting_ui):
    _server, url = starting_ui
    with pytest.raises(waiting.NotReady, match=r"gave up waiting for three workers at .*/json/"):
        waiting.wait_until(
            f"three workers at {url}",
            lambda: None if waiting.get_json(url) else None,
            timeout=0.3,
            interval=0.01,
        )


def test_a_dead_process_ends_the_wait_at_once():
    with pytest.raises(waiting.NotReady, match="the master exited rc=1"):
        waiting.wait_until(
            "the master", lambda: None, timeout=60, died=lambda: "the master exited rc=1"
        )


def test_refused_connections_keep_waiting_until_the_deadline():
    # a port nothing listens on: the refusal is a not-ready answer, and the message says so
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(waiting.NotReady, match=r"after 0 s; last answer: URLError"):
        waiting.wait_until(
            "a page", lambda: waiting.get_json(f"http://127.0.0.1:{port}/"), timeout=0.2
        )
