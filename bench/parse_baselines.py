"""Two trivial parsers, so that a parser's bracket F1 can be read against what structure alone gives.

    python bench/parse_baselines.py --baseline=right_branching --problem=parsing_wsj4k \
        --data_dir=WORK/data --inputs=WORK/test.beam21.inputs --output=WORK/test.right_branching.decodes

Both learn from the problem's training trees only and write one linearized tree per input line,
which `t2t-parse-eval` scores as it scores the decoder's output:

* right_branching: every suffix of the sentence is a constituent: the root takes the training
  trees' most frequent root label, each smaller suffix the most frequent label of the training
  rightmost constituents (final punctuation aside: English branches to the right).
* frequent_shape: the training trees' most frequent linearized tree among those with the
  sentence's number of words (of the nearest length that has one, its leaves then fitted by
  `bracket_f1.repair`).
"""

import argparse
import collections
import sys

from t2t_lite import registry
from t2t_lite.data import text_lines, trees
from t2t_lite.evaluate import bracket_f1


def training_trees(problem, data_dir: str) -> list:
    vocabulary = problem.vocabulary(data_dir)
    return [vocabulary.decode(example["targets"]) for example in problem.dataset("train", data_dir).as_numpy_iterator()]


def leaf_count(linearized: str) -> int:
    return sum(1 for token in linearized.split() if not token.startswith(("(", ")")) or len(token) == 1)


def right_branching(train: list):
    roots, suffixes = collections.Counter(), collections.Counter()
    for linearized in train:
        tree = trees.delinearize(linearized, ["w"] * leaf_count(linearized))
        roots[tree.label] += 1
        node = tree
        while constituents := [child for child in node.children if not trees.is_leaf(child)]:
            node = constituents[-1]  # the rightmost constituent, past a final "." leaf
            suffixes[node.label] += 1
    root = roots.most_common(1)[0][0]
    inner = suffixes.most_common(1)[0][0] if suffixes else root

    def parse(num_words: int) -> str:
        labels = [root] + [inner] * (num_words - 1)
        opening = " ".join(f"({label} {trees.NORMALIZED_TAG}" for label in labels)
        return opening + " " + " ".join(f"){label}" for label in reversed(labels))

    return parse


def frequent_shape(train: list):
    by_length = collections.defaultdict(collections.Counter)
    for linearized in train:
        by_length[leaf_count(linearized)][linearized] += 1
    lengths = sorted(by_length)

    def parse(num_words: int) -> str:
        nearest = min(lengths, key=lambda length: (abs(length - num_words), length))
        return bracket_f1.repair(by_length[nearest].most_common(1)[0][0], num_words)

    return parse


BASELINES = {"right_branching": right_branching, "frequent_shape": frequent_shape}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", choices=sorted(BASELINES), required=True)
    parser.add_argument("--problem", required=True, help="the parsing problem whose training trees are learned from")
    parser.add_argument("--data_dir", required=True, help="t2t-datagen's --data_dir of that problem")
    parser.add_argument("--t2t_usr_dir", default="", help="a package registering the problem, as the t2t tools take it")
    parser.add_argument("--inputs", required=True, help="sentences, one per line (t2t-decoder's .inputs file)")
    parser.add_argument("--output", required=True, help="where the linearized trees go, one per input line")
    args = parser.parse_args(argv)
    registry.import_usr_dir(args.t2t_usr_dir)

    parse = BASELINES[args.baseline](training_trees(registry.problem(args.problem), args.data_dir))
    sentences = text_lines.read_lines(args.inputs)
    with open(args.output, "w", encoding="utf-8") as output:
        for sentence in sentences:
            output.write(parse(max(1, len(sentence.split()))) + "\n")
    print(f"parse_baselines.py: {args.baseline} trees of {len(sentences)} sentences -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
