"""A trained model's split translated by t2t_lite and by its CTranslate2 conversion: sacreBLEU of each, greedy and beam.

    .venv/bin/python bench/ctranslate2_bleu.py --problem=translate_ende_gettext --data_dir=$DATA \
        --output_dir=$TRAIN/averaged [--split=test --beam_size=4 --alpha=0.6 --extra_length=50]

The model of --output_dir (its latest checkpoint) is exported with
t2t_lite/serve/ctranslate2_export.py into a temporary directory (float32 weights) and loaded
with compute_type float32. The split's sources (the detokenized ids of its TFRecords, as
`t2t-decoder --decode_split` reads them) are translated by `translation.translate` (t2t-decoder's
path: GNMT length penalty ((5 + |Y|) / 6)^α, tensor2tensor's stopping rule) and by
`Translator.translate_batch` (length penalty |Y|^α, its own stopping rule), both with up to
input length + extra_length subwords (CTranslate2 per batch of sentences of one length), EOS
first allowed (min_decoding_length 0). Prints, per setting, each engine's sacreBLEU against the
split's references and how many translations are identical; greedy decoding should make them
all identical up to near-ties (tests/test_ctranslate2_export.py), beam search differs by design.
"""

import argparse
import itertools
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import ctranslate2  # noqa: E402
import sentencepiece  # noqa: E402

from t2t_lite import registry  # noqa: E402
from t2t_lite.data.vocabulary import normalize_text  # noqa: E402
from t2t_lite.decode import decode_settings, model_loading, translation  # noqa: E402
from t2t_lite.evaluate import bleu  # noqa: E402
from t2t_lite.run_dir import model_info  # noqa: E402
from t2t_lite.serve import ctranslate2_export  # noqa: E402


def ctranslate2_translations(translator, vocabulary, sources, beam_size, alpha, extra_length, batch_size=32):
    """Each source translated by CTranslate2, in batches of sources with the same number of subwords."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=vocabulary.model_proto)
    pieces = [processor.encode(normalize_text(line), out_type=str) for line in sources]
    translations = [None] * len(sources)
    order = sorted(range(len(sources)), key=lambda index: len(pieces[index]))
    for length, group in itertools.groupby(order, key=lambda index: len(pieces[index])):
        group = list(group)
        for first in range(0, len(group), batch_size):
            batch = group[first : first + batch_size]
            results = translator.translate_batch(
                [pieces[index] for index in batch],
                beam_size=beam_size,
                length_penalty=alpha,
                max_decoding_length=length + 1 + extra_length,
                min_decoding_length=0,
                max_input_length=0,
            )
            for index, result in zip(batch, results):
                translations[index] = processor.decode_pieces(result.hypotheses[0])
    return translations


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", required=True)
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--output_dir", required=True, help="the trained (or averaged) model's directory")
    parser.add_argument("--split", default="test")
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--extra_length", type=int, default=50)
    args = parser.parse_args(argv)
    problem = registry.problem(args.problem)
    vocabulary = problem.vocabulary(args.data_dir)
    hparams = model_info.read_hparams(args.output_dir)
    sources, references = [], []
    for example in problem.dataset(args.split, args.data_dir).as_numpy_iterator():
        sources.append(vocabulary.decode(example["inputs"]))
        references.append(vocabulary.decode(example["targets"]))
    model = model_loading.load_model_for_decoding(problem, hparams, args.data_dir, args.output_dir)
    with tempfile.TemporaryDirectory() as scratch:
        version = ctranslate2_export.export_ctranslate2(problem, hparams, args.data_dir, args.output_dir, scratch)
        translator = ctranslate2.Translator(version, device="cpu", compute_type="float32")
        print("| decoding | t2t_lite sacreBLEU | CTranslate2 sacreBLEU | identical translations |")
        print("|---|---:|---:|---:|")
        for beam_size in sorted({1, args.beam_size}):
            settings = decode_settings.DecodeHParams.of(
                beam_size=beam_size, alpha=args.alpha, extra_length=args.extra_length, batch_size=32
            )
            ours = [
                t.hypotheses[0] for t in translation.translate(model, vocabulary, sources, settings, progress=False)
            ]
            theirs = ctranslate2_translations(translator, vocabulary, sources, beam_size, args.alpha, args.extra_length)
            same = sum(a == b for a, b in zip(ours, theirs))
            name = "greedy" if beam_size == 1 else f"beam {beam_size}, α {args.alpha}"
            print(
                f"| {name} | {bleu.evaluate(ours, references).sacrebleu:.2f} | "
                f"{bleu.evaluate(theirs, references).sacrebleu:.2f} | {same} of {len(sources)} |",
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
