"""t2t-insights: a local page where one types a sentence and sees its translation, beams and attention.

The successor of tensor2tensor's insights server. `Insights` decodes what was typed with a
loaded checkpoint (`translation.translate`, the decoder's beam search) and answers with the
attention and beam page of `t2t_lite.insights.attention_page`, the same page `t2t-decoder
--attention_dir` writes, with a form above it. One sentence per line, up to MAX_SENTENCES.

It is served with the standard library's `http.server.ThreadingHTTPServer`: a page for one
researcher on their own machine needs no framework, and the standard library adds no
dependency to pin, update or audit. Requests are bounded (MAX_BODY_BYTES, answered 413), and
every input the model cannot take (empty, not UTF-8, unknown symbols, longer than the model's
limit) gets a message on the page, never a traceback. A Content-Length that is not one plain
number of bytes is answered 400. Each connection has a deadline for its request line and headers
(HEADER_SECONDS, also the wait for the next request on a kept-alive connection) and another for its
body (BODY_SECONDS): a client that sends slowly or not at all is dropped when its deadline passes,
so it cannot hold a thread for ever, and other clients, each on a thread of its own, never wait
on it.

    server = make_server(Insights(model, vocabulary, settings, max_input_ids=256), "127.0.0.1", 8010)
    server.serve_forever()
"""

import http.server
import re
import socket
import sys
import threading
import traceback
import urllib.parse

from t2t_lite.decode import decode_settings, encoded_inputs, translation
from t2t_lite.insights import attention_page, attention_readout

MAX_BODY_BYTES = 64 * 1024  # A form of a few sentences is far smaller; larger requests are refused (413).
MAX_SENTENCES = 16  # Lines decoded per request: each is a beam search and a pass for its attention.
MAX_CHARS = 8000  # The form's own limit, well inside MAX_BODY_BYTES once percent-encoded.
HEADER_SECONDS = 10.0  # A request line and its headers must arrive within this; a browser needs milliseconds.
BODY_SECONDS = 30.0  # The body of a POST must arrive within this once its headers are in.
NOT_UTF8 = "The request's text is not valid UTF-8; send the sentence as UTF-8 text."


class Insights:
    """Decodes the sentences typed in the form and renders the page that shows them."""

    def __init__(
        self,
        model,
        vocabulary,
        settings: decode_settings.DecodeHParams,
        *,
        max_input_ids: int,
        limit_reason: str = "the model's limit",
        title: str = "t2t-insights",
        details: str = "",
    ):
        self.model, self.vocabulary, self.settings = model, vocabulary, settings
        self.max_input_ids, self.limit_reason = max_input_ids, limit_reason
        self.title, self.details = title, details
        self._lock = threading.Lock()  # one decoding at a time: the model and its compiled search are shared

    def page(self, text=None, message: str = "") -> str:
        """The page for `text` (None: the empty form), or for `message` when the input was refused."""
        sentences = []
        if text is not None and not message:
            sentences, message = self._decode(text)
        form = {
            "action": "/",
            "text": text or "",
            "max_chars": MAX_CHARS,
            "hint": f"One sentence per line, at most {MAX_SENTENCES}; at most {self.max_input_ids} subword "
            f"ids each ({self.limit_reason}).",
        }
        return attention_page.render(sentences, title=self.title, details=self.details, form=form, message=message)

    def _decode(self, text: str) -> tuple:
        """(page sentences, "") for the lines of `text`, or ([], why they cannot be decoded)."""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return [], "The input is empty: type a sentence to translate."
        if len(lines) > MAX_SENTENCES:
            return [], f"The input has {len(lines)} lines; this page decodes at most {MAX_SENTENCES} at a time."
        try:
            for number, line in enumerate(lines, start=1):
                self._check_length(number, line)
            with self._lock:
                translations = translation.translate(self.model, self.vocabulary, lines, self.settings, progress=False)
                return attention_readout.attention_sentences(self.model, self.vocabulary, translations), ""
        except encoded_inputs.BadInputError as error:
            return [], f"{error}".replace("input line", "Line", 1)

    def _check_length(self, number: int, line: str) -> None:
        length = len(encoded_inputs.encode_line(self.vocabulary, line, number))
        if length > self.max_input_ids:
            raise encoded_inputs.BadInputError(
                f"input line {number} has {length} subword ids (EOS included); this model takes at most "
                f"{self.max_input_ids} ({self.limit_reason}). Shorten or split it."
            )


def make_server(
    insights: Insights,
    host: str,
    port: int,
    *,
    header_seconds: float = HEADER_SECONDS,
    body_seconds: float = BODY_SECONDS,
) -> http.server.ThreadingHTTPServer:
    """An HTTP server of the page on host:port (port 0: a free one, see `server.server_address`).

    A connection whose request line and headers take longer than `header_seconds`, or whose body
    takes longer than `body_seconds`, is dropped without an answer.
    """
    server = http.server.ThreadingHTTPServer((host, port), _handler(insights, header_seconds, body_seconds))
    server.daemon_threads = True
    return server


def _handler(insights: Insights, header_seconds: float, body_seconds: float):
    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "t2t-insights"
        _watchdog = None
        _dropped = False

        # -- Deadlines: a timer that shuts the connection down if the client is too slow -------
        def _watch(self, seconds: float) -> None:
            self._unwatch()
            self._watchdog = threading.Timer(seconds, self._drop)
            self._watchdog.daemon = True
            self._watchdog.start()

        def _unwatch(self) -> bool:
            """Stops the deadline; False if it had already passed (the connection is being dropped)."""
            if self._watchdog is not None:
                self._watchdog.cancel()
                self._watchdog = None
            return not self._dropped

        def _drop(self) -> None:
            self._dropped = self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)  # a blocked read returns at once, empty
            except OSError:  # already closed by the client
                pass

        def handle_one_request(self):
            self._watch(header_seconds)  # the request line and headers (or the idle wait for them)
            try:
                super().handle_one_request()
            except OSError:  # answering a request cut off at its deadline: the client is gone
                if not self._dropped:
                    raise
                self.close_connection = True
            finally:
                self._unwatch()

        # -- Requests ------------------------------------------------------------------------------
        def do_GET(self):
            if not self._unwatch():
                return
            url = urllib.parse.urlsplit(self.path)
            if url.path != "/":
                return self._send(404, insights.page(message=f"No page at {url.path}; the page is /."))
            try:
                text = urllib.parse.parse_qs(url.query, keep_blank_values=True, encoding="utf-8", errors="strict").get(
                    "text", [None]
                )[0]
            except UnicodeDecodeError:
                return self._send(400, insights.page(message=NOT_UTF8))
            self._answer(text)

        def do_POST(self):
            if not self._unwatch():
                return
            if urllib.parse.urlsplit(self.path).path != "/":
                return self._send(404, insights.page(message="Send the form to /."))
            lengths = self.headers.get_all("Content-Length") or []
            if not lengths:
                return self._send(411, insights.page(message="The request has no Content-Length; send the form."))
            length = lengths[0].strip()
            # ASCII digits only: str.isdigit() also takes "²" and other digits int() refuses.
            if len(set(lengths)) > 1 or not re.fullmatch(r"[0-9]{1,12}", length):
                return self._send(
                    400,
                    insights.page(
                        message=f"The request's Content-Length ({', '.join(lengths)}) is not one number of bytes."
                    ),
                )
            if int(length) > MAX_BODY_BYTES:  # refused unread; the connection closes after the answer
                return self._send(
                    413,
                    insights.page(
                        message=f"The request has {int(length):,} bytes; this page takes at most {MAX_BODY_BYTES:,}."
                    ),
                )
            self._watch(body_seconds)
            body = self.rfile.read(int(length))
            if not self._unwatch() or len(body) < int(length):  # too slow, or the client hung up
                self.close_connection = True
                return
            try:
                text = urllib.parse.parse_qs(
                    body.decode("utf-8"), keep_blank_values=True, encoding="utf-8", errors="strict"
                )
            except UnicodeDecodeError:
                return self._send(400, insights.page(message=NOT_UTF8))
            self._answer(text.get("text", [""])[0])

        def _answer(self, text):
            try:
                self._send(200, insights.page(text))
            except Exception as error:  # a bug, not a user mistake: the page says so, the console has the trace
                traceback.print_exc(file=sys.stderr)
                self._send(
                    500,
                    insights.page(
                        message=f"Decoding failed ({type(error).__name__}: {error}); the server's console shows where."
                    ),
                )

        def _send(self, status: int, page: str):
            body = page.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            if status >= 400:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:  # the client left before its answer: nothing to tell it
                self.close_connection = True

    return Handler
