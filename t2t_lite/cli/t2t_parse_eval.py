"""t2t-parse-eval: labeled bracket precision, recall and F1 of decoded parses, as EVALB (§6.3).

    t2t-parse-eval --decoded_trees=parsing_wsj.test.decodes --gold_trees=parsing_wsj.test.targets
    t2t-parse-eval --decoded_trees=berkeley.wsj23.txt --gold_trees=wsj23.gold.mrg

Each file holds linearized trees, one per line (t2t-decoder's output for a parsing problem
and the split's `.targets` it writes beside it), or bracketed Penn Treebank trees (the
treebank's `.mrg` files, another parser's output), in the same order. Malformed linearized
outputs are repaired as Vinyals & Kaiser et al. (2015) do (`t2t_lite.evaluate.bracket_f1`).
"""

from absl import flags as absl_flags

from t2t_lite.cli import distinct_paths, flags
from t2t_lite.evaluate import bracket_f1

FLAGS = flags.FLAGS

absl_flags.DEFINE_string(
    "decoded_trees",
    None,
    "File of decoded trees: linearized, one per line (t2t-decoder's), or bracketed (another parser's).",
)
absl_flags.DEFINE_string(
    "gold_trees",
    None,
    "File of gold trees, same order: bracketed (Penn Treebank .mrg) or linearized (t2t-decoder's .targets).",
)


def main(argv):
    del argv
    flags.prepare()
    flags.require("decoded_trees", "gold_trees")
    distinct_paths.check_distinct({"--decoded_trees": FLAGS.decoded_trees, "--gold_trees": FLAGS.gold_trees})
    try:
        print(bracket_f1.evaluate_files(FLAGS.decoded_trees, FLAGS.gold_trees))
    except (OSError, ValueError) as error:  # unreadable file, bad gold bracketing, count mismatch
        raise flags.UsageError(str(error)) from None
