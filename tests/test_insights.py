"""t2t-insights: a typed sentence comes back translated with its beams and attention; bad input gets a message."""

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import forkserver
import numpy as np
import pytest
from absl import flags as absl_flags
from headless_chromium import DevTools, canvas_geometry, heat_map_cells, needs_chromium
from test_attention_page import page_attention
from test_translation import HPARAMS, trained  # noqa: F401 (a fixture: tiny random-weight model and its data)

from t2t_lite.cli import t2t_insights as insights_cli
from t2t_lite.decode.decode_settings import DecodeHParams
from t2t_lite.decode.translation import translate
from t2t_lite.insights import server as insights

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = DecodeHParams.of(beam_size=3, alpha=0.6, extra_length=3)


@pytest.fixture(scope="module")
def server(trained):  # noqa: F811
    problem, model, data_dir, _ = trained
    page = insights.Insights(model, problem.vocabulary(data_dir), SETTINGS, max_input_ids=12)
    server = insights.make_server(page, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def request(url, body: bytes = None):
    """(status, page) of a GET, or of a form POST when `body` is given."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=120) as answer:
            return answer.status, answer.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8")


def shown(page: str) -> tuple:
    """(the sentences the page carries, its message)."""
    data = json.loads(re.search(r'id="t2t-data">(.*?)</script>', page, re.S).group(1))
    message = re.search(r'<p class="message" role="alert">(.*?)</p>', page)
    return data["sentences"], message.group(1) if message else ""


def test_a_typed_sentence_gets_the_decoders_translation_beams_and_attention(trained, server):  # noqa: F811
    problem, model, data_dir, _ = trained
    status, page = request(server, urllib.parse.urlencode({"text": "3 4 5\n\n9 9 1 2"}).encode())
    sentences, message = shown(page)
    assert status == 200 and message == ""
    expected = translate(model, problem.vocabulary(data_dir), ["3 4 5", "9 9 1 2"], SETTINGS, progress=False)
    for sentence, translation in zip(sentences, expected):  # blank lines are not sentences
        assert sentence["source"] == translation.source
        assert [text for text, _ in sentence["beams"]] == translation.hypotheses
        np.testing.assert_allclose([score for _, score in sentence["beams"]], translation.scores, atol=1e-4)
        assert len(page_attention(sentence)["encoder_decoder"]) == HPARAMS.num_hidden_layers
    assert len(sentences) == 2
    assert shown(request(server + "?text=3%204%205")[1])[0][0]["beams"] == sentences[0]["beams"]  # GET: a link


@pytest.mark.parametrize(
    "body, status, message",
    [
        (b"text=", 200, "The input is empty"),
        (b"text=%20%0A%20", 200, "The input is empty"),
        (b"text=%FF%FE", 400, "not valid UTF-8"),
        (b"text=\xff\xfe", 400, "not valid UTF-8"),
        (b"text=3+x+4", 200, "Line 1: &#x27;x&#x27; is not a symbol"),
        (
            urllib.parse.urlencode({"text": "1\n" + "1 " * 12}).encode(),
            200,
            "Line 2 has 13 subword ids \\(EOS included\\); this model takes at most 12",
        ),
        (urllib.parse.urlencode({"text": "1\n" * 17}).encode(), 200, "has 17 lines; .* at most 16"),
        (
            b"text=" + b"1+" * insights.MAX_BODY_BYTES,
            413,
            "The request has 131,077 bytes; this page takes at most 65,536",
        ),
    ],
)
def test_input_the_model_cannot_take_gets_a_message_not_a_traceback(server, body, status, message):
    answer_status, page = request(server, body)
    assert answer_status == status
    assert re.search(message, shown(page)[1]) and "Traceback" not in page
    assert shown(page)[0] == []


def raw_request(url: str, request: bytes) -> tuple:
    """(status, page) of `request` sent as it is, bytes and headers that urllib would correct."""
    port = urllib.parse.urlsplit(url).port
    with socket.create_connection(("127.0.0.1", port), timeout=120) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode("utf-8")


@pytest.mark.parametrize("lengths", [["\u00b2"], ["1e3"], ["-5"], ["5", "6"], ["0x5"]])
def test_a_content_length_that_is_not_one_number_is_a_bad_request(server, lengths):
    """ "²".isdigit() is True and int("²") fails: only ASCII digits, given once, are a length."""
    headers = "".join(f"Content-Length: {length}\r\n" for length in lengths)
    status, page = raw_request(server, f"POST / HTTP/1.1\r\nHost: x\r\n{headers}\r\ntext=12345".encode())
    assert status == 400
    assert "is not one number of bytes" in shown(page)[1] and "Traceback" not in page


class FixedPage:
    """The page's stand-in: these tests are about connections, not decoding."""

    def page(self, text=None, message=""):
        return f"<p>{text}</p>"


@pytest.fixture
def impatient_server():
    """A server whose connections get 1 s for their headers and 1 s for their body; yields its port."""
    server = insights.make_server(FixedPage(), "127.0.0.1", 0, header_seconds=1.0, body_seconds=1.0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def trickle(port: int, first: bytes, byte: bytes, seconds: float) -> float:
    """Sends `first`, then `byte` every 0.1 s for at most `seconds`; how long until the server hung up."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as connection:
        connection.sendall(first)
        connection.settimeout(0.1)
        while time.monotonic() - start < seconds:
            try:
                if connection.recv(1024) == b"":  # the server closed the connection, unanswered
                    return time.monotonic() - start
            except TimeoutError:
                pass
            try:
                connection.sendall(byte)
            except OSError:  # reset by the server
                return time.monotonic() - start
    return float("inf")


@pytest.mark.parametrize(
    "first, byte",
    [
        (b"", b"G"),  # a request line that never ends
        (b"POST / HTTP/1.1\r\nHost: x\r\n", b"X"),  # headers that never end
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", b"t"),  # a body a byte at a time
    ],
)
def test_a_slow_client_is_dropped_at_its_deadline_and_others_are_answered(impatient_server, first, byte):
    answers = []

    def ask():
        with urllib.request.urlopen(f"http://127.0.0.1:{impatient_server}/?text=hello", timeout=30) as answer:
            answers.append((answer.status, answer.read().decode()))

    others = threading.Thread(target=ask)
    slow = threading.Thread(target=lambda: answers.append(trickle(impatient_server, first, byte, seconds=8.0)))
    slow.start()
    time.sleep(0.3)
    others.start()  # while the slow client is connected and sending
    others.join(timeout=30)
    slow.join(timeout=30)
    dropped_after = next(answer for answer in answers if isinstance(answer, float))
    assert (200, "<p>hello</p>") in answers  # the other client did not wait for the slow one
    assert 1.0 <= dropped_after < 4.0  # dropped at its 1 s deadline (plus scheduling), not when it gave up


def test_other_paths_are_not_found(server):
    status, page = request(server + "favicon.ico")
    assert status == 404 and "No page at /favicon.ico" in page


def run_insights(*argv):
    absl_flags.FLAGS.unparse_flags()
    absl_flags.FLAGS(["t2t-insights", "--problem=algorithmic_reverse", *argv])
    try:
        insights_cli.main([])
    finally:
        absl_flags.FLAGS.unparse_flags()


def test_cli_mistakes_are_named_before_serving(trained, tmp_path):  # noqa: F811
    _, _, data_dir, output_dir = trained
    common = (f"--data_dir={data_dir}", f"--output_dir={output_dir}")
    cases = [
        ((f"--output_dir={tmp_path / 'nowhere'}",), "--output_dir=.*nowhere: no such directory"),
        ((f"--data_dir={tmp_path / 'nothing'}",), "--data_dir=.*nothing: no such directory"),
        (("--decode_hparams=beam_size=0",), "--decode_hparams: beam_size"),
        (("--hparams=hidden_size=64",), "ckpt-7: its weights do not fit the model these hparams build"),
    ]
    for argv, message in cases:
        with pytest.raises(insights_cli.t2t_flags.UsageError, match=message):
            run_insights(*common, *argv)
    for host in ("", " "):  # the socket layer would take "" as every address
        with pytest.raises(insights_cli.t2t_flags.UsageError, match="--host is empty, which listens on every"):
            run_insights(*common, f"--host={host}")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(insights_cli.t2t_flags.UsageError, match=f"--port={port}: cannot listen there"):
            run_insights(*common, f"--port={port}")


@pytest.fixture
def running_tool(trained):  # noqa: F811
    """t2t-insights started as a user starts it, on a free port of 127.0.0.1; yields its URL."""
    _, _, data_dir, output_dir = trained
    process = forkserver.Popen(
        [
            sys.executable,
            os.path.join(REPO, "bin", "t2t-insights"),
            "--problem=algorithmic_reverse",
            f"--data_dir={data_dir}",
            f"--output_dir={output_dir}",
            "--port=0",
            "--decode_hparams=beam_size=2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.time() + 180
        line = process.stdout.readline()
        while "serving" not in line and time.time() < deadline and process.poll() is None:
            line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, f"t2t-insights did not start: {line!r}"
        yield url.group(0)
    finally:
        process.terminate()
        process.wait(timeout=30)


@needs_chromium
def test_a_person_types_a_sentence_and_sees_a_translation_and_a_heat_map(running_tool, tmp_path):
    """In headless Chromium: open the page, type into its form, click Translate, read the page and look at it."""
    browser = DevTools(running_tool, tmp_path / "profile")
    try:
        browser.wait_for("document.readyState === 'complete' && !!document.querySelector('textarea[name=text]')")
        assert browser.evaluate("document.getElementById('viewer').hidden")  # nothing to show before a sentence
        browser.type_into("textarea[name=text]", "3 4 5 6 7")
        browser.click("button[type=submit]")
        browser.wait_for("!!(document.getElementById('timing') || {}).textContent")
        dom = browser.evaluate("document.documentElement.outerHTML")
        pixels = browser.screenshot()
    finally:
        browser.close()
    assert re.search(r'<textarea name="text"[^>]*>3 4 5 6 7</textarea>', dom)  # the form keeps what was typed
    translation = re.search(r'<span id="translation">([^<]*)</span>', dom).group(1)
    assert re.fullmatch(r"\d( \d)*", translation)  # a sequence of the problem's symbols
    assert len(re.findall(r"<tr><td>\d</td>", dom)) == 2  # both beams, with their scores
    geometry = canvas_geometry(dom)
    assert (geometry["rows"], geometry["columns"]) == (6, 6)  # 5 symbols and EOS
    cells = heat_map_cells(pixels, geometry)
    assert cells.reshape(-1, 3).std(0).max() > 3  # cells of different colours: not a blank heat-map
