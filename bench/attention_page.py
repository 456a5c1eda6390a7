"""Size and drawing time of the attention and beam page for a base model and 100 sentences.

A transformer_base model with random weights (6 layers × 8 heads × 3 kinds of attention)
reads 100 sentence pairs of random ids, source and target lengths drawn from 10 to 60 tokens,
each with 4 beams; the page of
`t2t-decoder --attention_dir` is written for them. Headless Chromium then opens it from disk
and reports how long the page's data took to read, the first heat-map to draw, and every
view of the longest sentence (3 kinds × 6 layers × 8 heads and their mean) and the
mean-over-heads view of each sentence to draw.

    .venv/bin/python bench/attention_page.py --output_dir=page_bench
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402

from t2t_lite import registry  # noqa: E402
from t2t_lite.data.vocabulary import EOS_ID, SymbolVocabulary  # noqa: E402
from t2t_lite.decode import translation
from t2t_lite.insights import attention_readout
from t2t_lite.run_dir import model_info

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from headless_chromium import CHROMIUM, DevTools  # noqa: E402  (the browser driver of the browser tests)

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


def step_through(path, profile_dir):
    """(seconds from starting Chromium to the page's first heat-map, the page's own times)."""
    start = time.time()
    browser = DevTools(f"file://{path}", profile_dir)
    try:
        browser.wait_for("!!(document.getElementById('timing') || {}).textContent")
        first_view = time.time() - start
        return first_view, browser.evaluate(STEP_THROUGH_VIEWS)
    finally:
        browser.close()


def translations(model, rng, sentences):
    """Random sentences of 10-60 ids with four scored beams each, as the decoder returns them."""
    del model  # the page reads the attention back through the model; the ids need not be its own
    result = []
    for _ in range(sentences):
        source_ids = list(rng.integers(3, VOCAB_SIZE, rng.integers(10, 61))) + [EOS_ID]
        target_ids = list(rng.integers(3, VOCAB_SIZE, rng.integers(10, 61))) + [EOS_ID]
        texts = [" ".join(str(i) for i in rng.integers(3, VOCAB_SIZE, len(target_ids))) for _ in range(BEAMS)]
        result.append(
            translation.Translation(
                " ".join(map(str, source_ids[:-1])),
                texts,
                sorted(rng.normal(-1, 0.3, BEAMS), reverse=True),
                source_ids,
                len(source_ids),
                target_ids,
            )
        )
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--sentences", type=int, default=100)
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    model = model_info.build_model(registry.hparams("transformer_base"), VOCAB_SIZE)
    vocabulary = SymbolVocabulary(VOCAB_SIZE - 2)
    start = time.time()
    decoded = translations(model, np.random.default_rng(0), args.sentences)
    path = attention_readout.write_attention_page(
        model,
        vocabulary,
        decoded,
        os.path.join(args.output_dir, "attention.html"),
        title="transformer_base, random weights",
    )
    print(
        f"page of {args.sentences} sentences written in {time.time() - start:.1f} s: "
        f"{os.path.getsize(path) / 2**20:.1f} MiB ({path})"
    )
    if CHROMIUM is None:
        print("no chromium installed (apt-get install -y chromium): no drawing times")
        return
    seconds, report = step_through(path, os.path.join(args.output_dir, "profile"))
    print(f"chromium (started, page opened from disk, first heat-map shown): {seconds:.1f} s\n{report}")


if __name__ == "__main__":
    main()
