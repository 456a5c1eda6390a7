"""Agreement of one file of word alignments with another: precision, recall, F1 and AER of their links.

    .venv/bin/python bench/alignment_agreement.py --hypothesis=val.scores --reference=eflomal/val.align

Each file has one line per sentence pair, Pharaoh links `j-i` (source word - target word); a line
`text ||| links` (t2t-decoder's `write_alignment`, `--score_file`'s `score ||| links`) counts by its
links. Over all lines, with A the hypothesis' links and R the reference's,

    precision = |A ∩ R| / |A|,    recall = |A ∩ R| / |R|,    F1 = 2·P·R / (P + R),
    AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|)   (Och and Ney 2003),

where the reference's links are all sure and possible (S = P = R), so AER = 1 − F1. A line count that
differs, or a line that is not links, stops the script naming the file and line. `--json` prints one
object instead of the line.
"""

import argparse
import json
import sys

SEPARATOR = " ||| "


def line_links(line: str, path: str, number: int) -> set:
    """{(source word, target word)} of one line, its `text ||| ` part (if any) left off."""
    text = line.rstrip("\n")
    if SEPARATOR in text:
        text = text.rsplit(SEPARATOR, 1)[1]
    elif text.endswith(SEPARATOR.rstrip()):  # "text |||": a pair without links
        text = ""
    links = set()
    for link in text.split():
        source, dash, target = link.partition("-")
        if not (dash and source.isdigit() and target.isdigit()):
            raise ValueError(f"{path}:{number}: {link!r} is not a link source-target (e.g. 2-1)")
        links.add((int(source), int(target)))
    return links


def read_links(path: str) -> list:
    with open(path, encoding="utf-8") as lines:
        return [line_links(line, path, number) for number, line in enumerate(lines, start=1)]


def agreement(hypothesis: list, reference: list) -> dict:
    """Precision, recall, F1, AER and the link counts of two lists of per-line link sets."""
    proposed = sum(len(links) for links in hypothesis)
    gold = sum(len(links) for links in reference)
    shared = sum(len(mine & theirs) for mine, theirs in zip(hypothesis, reference))
    precision = shared / proposed if proposed else 0.0
    recall = shared / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    aer = 1.0 - 2 * shared / (proposed + gold) if proposed + gold else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "aer": aer,
        "hypothesis_links": proposed,
        "reference_links": gold,
        "shared_links": shared,
        "lines": len(reference),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hypothesis", required=True, help="alignments to score (Pharaoh, or `text ||| links`)")
    parser.add_argument("--reference", required=True, help="alignments to score against, one line per pair")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        hypothesis, reference = read_links(args.hypothesis), read_links(args.reference)
    except (OSError, ValueError) as error:
        print(f"alignment_agreement.py: {error}", file=sys.stderr)
        return 2
    if len(hypothesis) != len(reference):
        print(
            f"alignment_agreement.py: {args.hypothesis} has {len(hypothesis)} lines and {args.reference} "
            f"{len(reference)}; line n of each must align sentence pair n.",
            file=sys.stderr,
        )
        return 2
    scores = agreement(hypothesis, reference)
    if args.json:
        print(json.dumps(scores, sort_keys=True))
    else:
        print(
            f"alignment agreement: precision {scores['precision']:.4f}, recall {scores['recall']:.4f}, "
            f"F1 {scores['f1']:.4f}, AER {scores['aer']:.4f} ({scores['shared_links']:,} of "
            f"{scores['hypothesis_links']:,} links in {scores['reference_links']:,} of the reference's, "
            f"{scores['lines']:,} lines)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
