"""Size and drawing time of the attention and beam page for a base model and 100 sentences.

A transformer_base model with random weights (6 layers × 8 heads × 3 kinds of attention)
reads 100 sentence pairs of random ids, source and target lengths drawn from 10 to 60 tokens
(WMT newstest sentences average about 30 subwords), each with 4 beams; the page of
`t2t-decoder --attention_dir` is written for them. Headless Chromium then opens it from disk
and reports how long the page's data took to read, the first heat-map to draw, and every
view of the longest sentence (3 kinds × 6 layers × 8 heads and their mean) and the
mean-over-heads view of each sentence to draw.

    .venv/bin/python bench/attention_page.py --output_dir=/tmp/page_bench
"""

import argparse
import json
import os
import shutil
import subprocess
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402

from t2t_lite import checkpoints, inference, registry  # noqa: E402
from t2t_lite.vocabulary import SymbolVocabulary  # noqa: E402

VOCAB_SIZE = 37000
BEAMS = 4

# Run in the open page (Chrome DevTools Protocol): opens the longest sentence, draws each of its
# views, then opens every sentence (inflate + draw), and returns the times. --dump-dom cannot do
# this: it dumps at the load event, before the page's asynchronous work, and its virtual-time mode
# stops the page's clock.
STEP_THROUGH_VIEWS = """(async () => {
  const sorted = (values) => values.slice().sort((a, b) => a - b);
  const describe = (values) => `median ${sorted(values)[values.length >> 1].toFixed(1)} ms, ` +
    `max ${Math.max(...values).toFixed(1)} ms over ${values.length}`;
  const size = (s) => s.source_tokens.length + s.target_tokens.length;
  const longest = DATA.sentences.reduce((best, s, i) => size(s) > size(DATA.sentences[best]) ? i : best, 0);
  const firstView = document.getElementById("timing").textContent;
  controls.sentence.value = longest;
  await showSentence();
  const views = [];
  for (const kind of Object.keys(AXES)) for (let layer = 0; layer < 6; layer++) for (let head = -1; head < 8; head++) {
    controls.kind.value = kind; controls.layer.value = layer; controls.head.value = head;
    draw();
    views.push(lastDrawMs);
  }
  const sentences = [];
  for (let i = 0; i < DATA.sentences.length; i++) {
    const start = performance.now();
    controls.sentence.value = i;
    await showSentence();
    sentences.push(performance.now() - start);
  }
  return `first view: ${firstView}\nlongest sentence (${longest + 1}: ${size(DATA.sentences[longest])} tokens), ` +
    `each of its 162 views drawn: ${describe(views)}\nopening each sentence (inflate + draw): ${describe(sentences)}`;
})()"""


class DevToolsPipe:
    """Chromium driven over --remote-debugging-pipe: JSON messages ending in NUL on its fds 3 and 4."""

    def __init__(self, chromium, url, profile_dir):
        to_chromium, self._commands = os.pipe()
        self._events, from_chromium = os.pipe()

        def map_fds():  # in the child: read commands on fd 3, write answers on fd 4
            os.dup2(to_chromium, 10)  # through fds above 4, as either pipe end may itself be fd 3 or 4
            os.dup2(from_chromium, 11)
            os.dup2(10, 3)
            os.dup2(11, 4)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
             "--remote-debugging-pipe", f"--user-data-dir={profile_dir}", url],
            preexec_fn=map_fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chromium)
        os.close(from_chromium)
        self._buffer, self._next_id = b"", 0

    def call(self, method, session=None, **params):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                self._buffer += os.read(self._events, 1 << 20)
            text, self._buffer = self._buffer.split(b"\0", 1)
            answer = json.loads(text)
            if answer.get("id") == self._next_id:
                return answer.get("result", answer)

    def evaluate(self, expression, session):
        answer = self.call("Runtime.evaluate", session, expression=expression, awaitPromise=True, returnByValue=True)
        return answer.get("result", {}).get("value")

    def close(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def step_through(path, chromium, profile_dir):
    """(seconds until the page showed its first heat-map, the page's own times)."""
    start = time.time()
    browser = DevToolsPipe(chromium, f"file://{path}", profile_dir)
    try:
        page = next(target for target in browser.call("Target.getTargets")["targetInfos"] if target["type"] == "page")
        session = browser.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        shown = "(() => { const t = document.getElementById('timing'); return t && t.textContent; })()"
        while not browser.evaluate(shown, session):
            time.sleep(0.05)
        first_view = time.time() - start
        return first_view, browser.evaluate(STEP_THROUGH_VIEWS, session)
    finally:
        browser.close()


def translations(model, rng, sentences):
    result = []
    for _ in range(sentences):
        source_ids = list(rng.integers(3, VOCAB_SIZE, rng.integers(10, 61))) + [inference.EOS_ID]
        target_ids = list(rng.integers(3, VOCAB_SIZE, rng.integers(10, 61))) + [inference.EOS_ID]
        texts = [" ".join(str(i) for i in rng.integers(3, VOCAB_SIZE, len(target_ids))) for _ in range(BEAMS)]
        result.append(inference.Translation(" ".join(map(str, source_ids[:-1])), texts,
                                            sorted(rng.normal(-1, 0.3, BEAMS), reverse=True),
                                            source_ids, len(source_ids), target_ids))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--sentences", type=int, default=100)
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    model = checkpoints.build_model(registry.hparams("transformer_base"), VOCAB_SIZE)
    vocabulary = SymbolVocabulary(VOCAB_SIZE - 2)
    start = time.time()
    decoded = translations(model, np.random.default_rng(0), args.sentences)
    path = inference.attention_page(model, vocabulary, decoded, os.path.join(args.output_dir, "attention.html"),
                                    title="transformer_base, random weights")
    print(f"page of {args.sentences} sentences written in {time.time() - start:.1f} s: "
          f"{os.path.getsize(path) / 2**20:.1f} MiB ({path})")
    chromium = shutil.which("chromium")
    if not chromium:
        print("no chromium installed (apt-get install -y chromium): no drawing times")
        return
    seconds, report = step_through(path, chromium, os.path.join(args.output_dir, "profile"))
    print(f"chromium (started, page opened from disk, first heat-map shown): {seconds:.1f} s\n{report}")


if __name__ == "__main__":
    main()
