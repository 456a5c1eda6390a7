"""Serving speed of the t2t-exporter SavedModel: sentences/s for batches of 1, 8 and 64.

    .venv/bin/python bench/serve.py                      # transformer_tiny, its decode defaults
    .venv/bin/python bench/serve.py --decode_hparams=beam_size=1 --batch_sizes=1,64

Everything is made here, in a temporary directory: random sentences over a made-up
lexicon, a 1,000-piece SentencePiece vocabulary trained on them, a `transformer_tiny`
with random weights saved as checkpoint `ckpt-1`, and its export by `export_model`.
The SavedModel is then loaded with `tf.saved_model.load` and its `serving_default`
signature is called on raw strings, as a server would: the timed calls include
tokenization, beam search and detokenization. Each batch size decodes the same
`--sentences` source sentences of 12–28 words (about 33 subwords, near WMT's
average); the first call of each size (graph warm-up) is reported apart and excluded.

Random weights decide how long the outputs are (EOS or the input + extra_length
limit), and decoding time grows with it, so the output length in subwords is
reported beside each rate (from the `translate_ids` signature, untimed).
"""

import argparse
import os
import platform
import random
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (the SentencePiece ops of the loaded graph)

from t2t_lite import checkpoints, export, registry, vocabulary  # noqa: E402

VOCAB_SIZE = 1000


def made_up_sentences(count, min_words, max_words, seed):
    """Sentences over 300 random lowercase words, which the vocabulary learns as whole pieces."""
    letters = random.Random(0)  # one lexicon for the vocabulary's text and the timed sentences
    lexicon = ["".join(letters.choice("abcdefghijklmnopqrstuvwxyzäöü") for _ in range(letters.randint(2, 7)))
               for _ in range(300)]
    rng = random.Random(seed)
    return [" ".join(rng.choice(lexicon) for _ in range(rng.randint(min_words, max_words))) for _ in range(count)]


def write_export(scratch, hparams_set, decode_hparams):
    """Vocabulary, random-weight checkpoint and export in `scratch`; returns (version dir, vocabulary)."""
    problem = registry.problem("translate_files")
    data_dir, train_dir = os.path.join(scratch, "data"), os.path.join(scratch, "train")
    vocab = vocabulary.train_vocabulary(made_up_sentences(5000, 3, 30, seed=1),
                                        os.path.join(data_dir, problem.vocab_filename()), VOCAB_SIZE)
    hparams = registry.hparams(hparams_set)
    keras.utils.set_random_seed(1234)
    model = checkpoints.build_model(hparams, vocab.vocab_size)
    checkpoints.checkpoint_manager(tf.train.Checkpoint(model=checkpoints.trackable_model(model)), train_dir,
                                   1).save(1)
    start = time.perf_counter()
    version_dir = export.export_model(problem, hparams, data_dir, train_dir, os.path.join(scratch, "export"),
                                      decode_hparams)
    print(f"# export took {time.perf_counter() - start:.1f} s; size {directory_megabytes(version_dir):.1f} MB "
          f"(saved_model.pb {os.path.getsize(os.path.join(version_dir, 'saved_model.pb')) / 1e6:.1f} MB)")
    return version_dir, vocab


def directory_megabytes(path):
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names) / 1e6


def time_batches(translate, sentences, batch_size):
    """(first call seconds, [seconds per timed batch]) over `sentences` in batches of `batch_size`."""
    batches = [sentences[i:i + batch_size] for i in range(0, len(sentences), batch_size)]
    start = time.perf_counter()
    translate(inputs=tf.constant(batches[0]))
    first = time.perf_counter() - start
    times = []
    for batch in batches:
        start = time.perf_counter()
        translate(inputs=tf.constant(batch))["outputs"].numpy()
        times.append(time.perf_counter() - start)
    return first, times


def output_lengths(translate_ids, vocab, sentences):
    """Subwords emitted per sentence (EOS included), by the same graph from the vocabulary's ids."""
    encoded = [vocab.encode(sentence) for sentence in sentences]
    width = max(len(row) for row in encoded)
    ids = np.array([row + [0] * (width - len(row)) for row in encoded], np.int32)
    outputs = translate_ids(inputs=tf.constant(ids))["outputs"].numpy()
    return [int(np.argmax(row == 1)) + 1 if (row == 1).any() else int((row != 0).sum()) for row in outputs]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--decode_hparams", default="", help='e.g. "beam_size=4,alpha=0.6,extra_length=50"')
    parser.add_argument("--batch_sizes", default="1,8,64")
    parser.add_argument("--sentences", type=int, default=128, help="sentences decoded per batch size")
    args = parser.parse_args()
    print(f"# t2t_lite serving benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, host "
          f"{platform.node()}, {os.cpu_count()} CPUs, TF {tf.__version__}, {args.hparams_set} (random weights), "
          f"{VOCAB_SIZE}-piece vocabulary, --decode_hparams='{args.decode_hparams}'")
    sentences = made_up_sentences(args.sentences, 12, 28, seed=2)
    with tempfile.TemporaryDirectory() as scratch:
        version_dir, vocab = write_export(scratch, args.hparams_set, args.decode_hparams)
        loaded = tf.saved_model.load(version_dir)
        translate = loaded.signatures[export.TEXT_SIGNATURE]
        lengths = output_lengths(loaded.signatures[export.IDS_SIGNATURE], vocab, sentences)
        source = [len(vocab.encode(s)) + 1 for s in sentences]
        print(f"# {len(sentences)} sentences: source {statistics.mean(source):.1f} subwords (EOS included), "
              f"output {statistics.mean(lengths):.1f} subwords on average")
        print("| batch | sentences/s | output subwords/s | ms per batch median [min–max] | first call s |")
        print("|---:|---:|---:|---:|---:|")
        for batch_size in map(int, args.batch_sizes.split(",")):
            first, times = time_batches(translate, sentences, batch_size)
            rate = len(sentences) / sum(times)
            print(f"| {batch_size} | {rate:.1f} | {rate * statistics.mean(lengths):.0f} | "
                  f"{1000 * statistics.median(times):.0f} [{1000 * min(times):.0f}–{1000 * max(times):.0f}] | "
                  f"{first:.1f} |", flush=True)


if __name__ == "__main__":
    main()
