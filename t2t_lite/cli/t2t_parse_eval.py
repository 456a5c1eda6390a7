"""t2t-parse-eval: labeled bracket precision, recall and F1 of decoded parses, as EVALB (§6.3).

    t2t-parse-eval --decoded_trees=wsj23.decoded --gold_trees=wsj23.gold.mrg

--decoded_trees holds one linearized tree per line (t2t-decoder's output for a parsing
problem); --gold_trees the bracketed Penn Treebank trees, in the same order.
Malformed outputs are repaired as Vinyals & Kaiser et al. (2015) do (`t2t_lite.evaluate.bracket_f1`).
"""

from absl import flags as absl_flags

from t2t_lite.cli import flags
from t2t_lite.evaluate import bracket_f1

FLAGS = flags.FLAGS

absl_flags.DEFINE_string("decoded_trees", None, "File of decoded linearized trees, one per line.")
absl_flags.DEFINE_string("gold_trees", None, "File of gold bracketed trees (Penn Treebank .mrg style), same order.")


def main(argv):
    del argv
    flags.prepare()
    flags.require("decoded_trees", "gold_trees")
    try:
        print(bracket_f1.evaluate_files(FLAGS.decoded_trees, FLAGS.gold_trees))
    except (OSError, ValueError) as error:  # unreadable file, bad gold bracketing, count mismatch
        raise flags.UsageError(str(error)) from None
