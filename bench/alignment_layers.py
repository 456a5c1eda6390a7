"""Which decoder layer and heads align a trained model's words best, on words written alike on both sides.

    .venv/bin/python bench/alignment_layers.py --problem=translate_ende_gettext --data_dir=$DATA \
        --output_dir=$TRAIN [--split=test --pairs=500]

Real text comes without reference alignments, but a word written identically, once, in a source and
once in its reference translation (a placeholder such as `%s`, a name, a number, a URL) is, but for
rare coincidences, the translation of itself: such anchor words are links whose truth is known.
For each layer of the decoder and each number of its first heads averaged (all of them, then 1, 2, …),
the split's first --pairs (source, reference) pairs are aligned as `t2t-decoder --score_file` with
write_alignment aligns them (t2t_lite/decode/alignment.py), and the script prints the share of
anchor words linked to their twin. The figures behind the defaults are in docs/results.md.
"""

import argparse
import collections
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from t2t_lite import registry  # noqa: E402
from t2t_lite.decode import model_loading, scoring  # noqa: E402
from t2t_lite.decode.decode_settings import DecodeHParams  # noqa: E402
from t2t_lite.run_dir import model_info  # noqa: E402


def anchors(source: str, target: str) -> dict:
    """{target word index: source word index} of the words written once on each side, with a letter or digit."""
    source_words, target_words = source.split(), target.split()
    in_source, in_target = collections.Counter(source_words), collections.Counter(target_words)
    return {
        target_words.index(word): source_words.index(word)
        for word in in_target
        if in_target[word] == 1 and in_source[word] == 1 and any(character.isalnum() for character in word)
    }


def anchor_share(pair_anchors: list, links: list) -> float:
    """The share of anchors whose target word is linked to its twin, over all pairs' anchors."""
    found = total = 0
    for expected, text in zip(pair_anchors, links):
        linked = {int(target): int(source) for source, target in (link.split("-") for link in text.split())}
        found += sum(linked.get(target) == source for target, source in expected.items())
        total += len(expected)
    return found / max(total, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", required=True)
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--output_dir", required=True, help="The run directory (its latest checkpoint).")
    parser.add_argument("--split", default="test")
    parser.add_argument("--pairs", type=int, default=500)
    args = parser.parse_args()
    problem = registry.problem(args.problem)
    hparams = model_info.read_hparams(args.output_dir)
    model = model_loading.load_model_for_decoding(problem, hparams, args.data_dir, args.output_dir)
    vocabulary = problem.vocabulary(args.data_dir)
    pairs = [
        (vocabulary.decode(example["inputs"]), vocabulary.decode(example["targets"]))
        for example in problem.dataset(args.split, args.data_dir).take(args.pairs).as_numpy_iterator()
    ]
    pair_anchors = [anchors(source, target) for source, target in pairs]
    print(f"{len(pairs)} {args.split} pairs, {sum(map(len, pair_anchors))} anchor words")
    for layer in range(hparams.decoder_layers):
        for heads in range(hparams.num_heads + 1):
            settings = DecodeHParams.of(write_alignment=True, alignment_layer=layer, alignment_heads=heads)
            links = [score.alignment for score in scoring.score_pairs(model, vocabulary, pairs, settings)]
            share = anchor_share(pair_anchors, links)
            print(f"alignment_layer={layer} alignment_heads={heads} ({heads or 'all'}): {share:.3f}")


if __name__ == "__main__":
    main()
