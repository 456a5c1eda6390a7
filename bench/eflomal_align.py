"""Word alignments of a parallel corpus by eflomal (Östling and Tiedemann 2016), for guided alignment.

    .venv/bin/pip install -e ".[align]"     # eflomal builds its C sampler (a few minutes)
    .venv/bin/python bench/eflomal_align.py --train_source=train.en --train_target=train.de \\
        --val_source=val.en --val_target=val.de --output_dir=eflomal-en-de

writes `train.align` and `val.align` in --output_dir: one line per pair, Pharaoh links `j-i` over the
whitespace-separated words of the raw text (the words t2t-datagen --train_alignments reads and
t2t-decoder's write_alignment writes). Unsupervised aligners learn from the text they align, so train
and val are aligned together, as is usual, then split again: val's links are a reference that no
model trained on (t2t-trainer never sees them) and that is as good as train's.

eflomal aligns each direction (source→target and target→source, each word of one side linked to at
most one of the other); the two are symmetrized with grow-diag-final-and (Koehn et al. 2005, the
Moses default, `symmetrize`): start from the links both directions agree on, grow into neighbouring
links (diagonals included) that either direction has while that links a word not yet linked, then
add the links of either direction whose words are both still unlinked. Intersection alone would
keep only the surest links (high precision, low recall) and leave many words unlinked; the union adds
every doubtful one; grow-diag-final-and, between them, links most words and is what a Moses or
fast_align user means by symmetrized alignments.
The words are given to eflomal as they are (its own preprocessing, lower-casing included, applies).
"""

import argparse
import os
import sys
import tempfile

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def symmetrize(forward: set, reverse: set) -> set:
    """grow-diag-final-and of two directions' links {(source word, target word)} of one pair."""
    union = forward | reverse
    links = forward & reverse
    linked_sources = {source for source, _ in links}
    linked_targets = {target for _, target in links}

    def add(link):
        links.add(link)
        linked_sources.add(link[0])
        linked_targets.add(link[1])

    grown = True
    while grown:  # grow-diag: neighbours of the links so far, in the union, that link a word still unlinked
        grown = False
        for source, target in sorted(links):
            for step_source, step_target in NEIGHBOURS:
                neighbour = (source + step_source, target + step_target)
                if neighbour in union and neighbour not in links:
                    if neighbour[0] not in linked_sources or neighbour[1] not in linked_targets:
                        add(neighbour)
                        grown = True
    for direction in (forward, reverse):  # final-and: both words still unlinked
        for link in sorted(direction):
            if link[0] not in linked_sources and link[1] not in linked_targets:
                add(link)
    return links


def parse_pharaoh(line: str) -> set:
    return {tuple(int(index) for index in link.split("-")) for link in line.split()}


def pharaoh(links: set) -> str:
    """Links in target order, then source order (the order t2t-decoder writes)."""
    return " ".join(f"{source}-{target}" for source, target in sorted(links, key=lambda link: (link[1], link[0])))


def read_lines(path: str) -> list:
    with open(path, encoding="utf-8") as file:
        return [" ".join(line.split()) for line in file]


def align_both_directions(sources: list, targets: list, work_dir: str) -> tuple:
    """eflomal's forward and reverse links (each a list of per-pair sets, in source-target order)."""
    import eflomal  # the optional extra `align`; imported here so --help works without it

    forward_path, reverse_path = os.path.join(work_dir, "forward"), os.path.join(work_dir, "reverse")
    aligner = eflomal.Aligner()
    with open(_written(work_dir, "source", sources)) as source, open(_written(work_dir, "target", targets)) as target:
        aligner.align(source, target, links_filename_fwd=forward_path, links_filename_rev=reverse_path, quiet=True)
    return [parse_pharaoh(line) for line in read_lines(forward_path)], [
        parse_pharaoh(line) for line in read_lines(reverse_path)
    ]


def _written(work_dir: str, name: str, lines: list) -> str:
    path = os.path.join(work_dir, name)
    with open(path, "w", encoding="utf-8") as file:
        file.writelines(line + "\n" for line in lines)
    return path


def check_parallel(source_path: str, target_path: str) -> tuple:
    sources, targets = read_lines(source_path), read_lines(target_path)
    if len(sources) != len(targets):
        raise ValueError(f"{source_path} has {len(sources)} lines and {target_path} {len(targets)}")
    return sources, targets


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for split in ("train", "val"):
        for side in ("source", "target"):
            parser.add_argument(f"--{split}_{side}", required=True, help=f"the {split} {side} text, a sentence a line")
    parser.add_argument("--output_dir", required=True, help="where train.align and val.align are written")
    args = parser.parse_args(argv)
    try:
        train = check_parallel(args.train_source, args.train_target)
        val = check_parallel(args.val_source, args.val_target)
        os.makedirs(args.output_dir, exist_ok=True)
        with tempfile.TemporaryDirectory() as work_dir:
            forward, reverse = align_both_directions(train[0] + val[0], train[1] + val[1], work_dir)
    except (OSError, ValueError, ImportError) as error:
        print(f"eflomal_align.py: {error}", file=sys.stderr)
        return 2
    links = [symmetrize(one, other) for one, other in zip(forward, reverse)]
    for split, lines in (("train", links[: len(train[0])]), ("val", links[len(train[0]) :])):
        path = os.path.join(args.output_dir, f"{split}.align")
        with open(path + ".incomplete", "w", encoding="utf-8") as file:
            file.writelines(pharaoh(pair) + "\n" for pair in lines)
        os.replace(path + ".incomplete", path)
        print(f"eflomal_align.py: {path}: {len(lines):,} pairs, {sum(map(len, lines)):,} links (grow-diag-final-and)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
