"""sacreBLEU of translations bucketed by source length: does a model extrapolate to inputs longer than its training's?

    .venv/bin/python bench/length_bleu.py --source=$CORPUS/val.en --reference=$CORPUS/val.de \
        [--vocab=$WORK/data/vocab.translate_files.model] [--edges=8,16,24,32] \
        absolute=$ABSOLUTE/val.decodes relative=$RELATIVE/val.decodes

Each NAME=FILE is one system's translations, a line per source line. A source's length is its
number of subwords under --vocab (the SentencePiece model of the runs' data_dir, as `max_length`
counts them; without it, its whitespace-separated words). The buckets end at --edges: 1–8,
9–16, ..., and one above the last edge. Prints a Markdown table: per bucket, its sentences and
each system's sacreBLEU on them (sacrebleu's default signature, as t2t-bleu reports it).

Relative positions against absolute ones for inputs longer than training's (Shaw et al. 2018): train the
Multi30k recipe's set and its relative variant with training examples cut at 24 subwords, then bucket their
val translations:

    for SET in transformer_multi30k_small transformer_multi30k_small_relative; do
      CORPUS=../shared/data/multi30k WORK=runs/$SET-len24 HPARAMS_SET=$SET HPARAMS=max_length=24 \\
          bash bench/multi30k.sh
    done
    .venv/bin/python bench/length_bleu.py --source=../shared/data/multi30k/val.en \\
        --reference=../shared/data/multi30k/val.de --edges=8,16,24,32 \\
        --vocab=runs/transformer_multi30k_small-len24/data/vocab.translate_files.model \\
        absolute=runs/transformer_multi30k_small-len24/val.decodes \\
        relative=runs/transformer_multi30k_small_relative-len24/val.decodes
"""

import argparse
import sys

import sacrebleu


def bucket_names(edges: list) -> list:
    """ "1-8", "9-16", ..., and ">32" for edges [8, 16, ..., 32]."""
    starts = [1] + [edge + 1 for edge in edges[:-1]]
    return [f"{start}-{end}" for start, end in zip(starts, edges)] + [f">{edges[-1]}"]


def bucket_of(length: int, edges: list) -> int:
    """The index of the bucket a source of `length` falls in: the first edge ≥ length, else the last bucket."""
    return next((index for index, edge in enumerate(edges) if length <= edge), len(edges))


def bucketed_bleu(lengths: list, references: list, systems: dict, edges: list) -> list:
    """[(bucket name, sentences, {system: sacreBLEU or None for an empty bucket})] for each bucket."""
    members = [[] for _ in range(len(edges) + 1)]
    for line, length in enumerate(lengths):
        members[bucket_of(length, edges)].append(line)
    rows = []
    for name, lines in zip(bucket_names(edges), members):
        scores = {
            system: sacrebleu.corpus_bleu([hypotheses[i] for i in lines], [[references[i] for i in lines]]).score
            if lines
            else None
            for system, hypotheses in systems.items()
        }
        rows.append((name, len(lines), scores))
    return rows


def markdown_table(rows: list, systems: list) -> str:
    lines = [f"| source length | sentences | {' | '.join(systems)} |", "|---|---|" + "---|" * len(systems)]
    for name, count, scores in rows:
        cells = ["–" if scores[system] is None else f"{scores[system]:.2f}" for system in systems]
        lines.append(f"| {name} | {count} | {' | '.join(cells)} |")
    return "\n".join(lines)


def read_lines(path: str) -> list:
    with open(path, encoding="utf-8") as file:
        return file.read().splitlines()


def source_lengths(sources: list, vocab_path: str) -> list:
    if not vocab_path:
        return [len(line.split()) for line in sources]
    import sentencepiece

    from t2t_lite.data.vocabulary import normalize_text

    processor = sentencepiece.SentencePieceProcessor(model_file=vocab_path)
    return [len(processor.encode(normalize_text(line))) for line in sources]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="the source lines (a line per sentence)")
    parser.add_argument("--reference", required=True, help="the reference translations, a line per source line")
    parser.add_argument("--vocab", default="", help="SentencePiece model: lengths in its subwords (default: words)")
    parser.add_argument("--edges", default="8,16,24,32", help="the buckets' upper ends, increasing")
    parser.add_argument("systems", nargs="+", metavar="NAME=FILE", help="a system's translations")
    args = parser.parse_args(argv)
    try:
        args.edges = [int(edge) for edge in args.edges.split(",")]
    except ValueError:
        parser.error(f"--edges={args.edges}: give increasing whole numbers, e.g. 8,16,24,32")
    if args.edges != sorted(set(args.edges)) or args.edges[0] < 1:
        parser.error(f"--edges={','.join(map(str, args.edges))}: give increasing whole numbers ≥ 1")
    if any("=" not in system for system in args.systems):
        parser.error("give each system as NAME=FILE, e.g. relative=runs/relative/val.decodes")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    sources, references = read_lines(args.source), read_lines(args.reference)
    systems = dict(system.split("=", 1) for system in args.systems)
    translations = {name: read_lines(path) for name, path in systems.items()}
    for name, lines in [("--reference", references), *translations.items()]:
        if len(lines) != len(sources):
            print(f"length_bleu.py: {name} has {len(lines)} lines, --source {len(sources)}", file=sys.stderr)
            return 2
    rows = bucketed_bleu(source_lengths(sources, args.vocab), references, translations, args.edges)
    print(markdown_table(rows, list(translations)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
