"""t2t-datagen: write a problem's vocabulary and TFRecord files, as tensor2tensor's tool.

    t2t-datagen --problem=translate_ende_gettext --data_dir=~/t2t_data --tmp_dir=~/t2t_tmp

Reuses whatever a previous run left in --data_dir, unless the raw files in --tmp_dir
changed since it was written: then it names them and stops; --overwrite regenerates
the vocabulary and every split. Prints how many pairs were written and dropped, and
why. `--problem=P_rev` generates P's files (the reverse direction reads the same files
with inputs and targets swapped). `--vocab_from=FILE` encodes with an existing vocabulary
(another model's, to fine-tune it: t2t-trainer --warm_start_from) instead of training one.
`--train_alignments=FILE` stores Pharaoh word links of the training pairs in their records, for
training with guided alignment (t2t_lite/data/word_alignment.py).
"""

import os

from absl import flags as absl_flags

from t2t_lite import registry
from t2t_lite.cli import distinct_paths, flags
from t2t_lite.data import datagen
from t2t_lite.problems.translate_files import CorpusError

absl_flags.DEFINE_bool(
    "overwrite",
    False,
    "Delete the problem's data in --data_dir (shards, vocabulary) and "
    "generate it afresh from --tmp_dir; needed when the raw files changed.",
)
absl_flags.DEFINE_string(
    "vocab_from",
    None,
    "Encode with this vocabulary file (e.g. the vocab.<problem>.model another model was trained with, "
    "to warm-start from it) instead of training one; copied into --data_dir under this problem's name.",
)

absl_flags.DEFINE_string(
    "train_alignments",
    None,
    "Pharaoh word links of the training pairs (`0-0 2-1`: source word-target word, counted from 0 over "
    "whitespace-separated words), one line per raw training pair; stored with each pair for guided "
    "alignment (hparam guided_alignment_weight). bench/eflomal_align.py writes such a file.",
)


def main(argv):
    del argv
    flags.prepare()
    flags.require("problem", "data_dir", "tmp_dir")
    problem = flags.problem_from_flags()
    if problem.was_reversed:
        problem = registry.problem(problem.base_name)
    data_dir = os.path.expanduser(flags.writable_dir("data_dir"))
    tmp_dir = os.path.expanduser(flags.writable_dir("tmp_dir"))  # downloads go there, so it may not exist yet
    if flags.FLAGS.vocab_from and flags.FLAGS.overwrite:  # it would be removed before it is read
        removed = datagen.generated_paths(problem, data_dir)
        distinct_paths.check_distinct(
            {"--vocab_from": flags.FLAGS.vocab_from},
            {f"--data_dir's {os.path.basename(path)}": path for path in removed},
        )
    try:
        datagen.generate(
            problem,
            data_dir,
            tmp_dir,
            overwrite=flags.FLAGS.overwrite,
            vocab_from=flags.FLAGS.vocab_from,
            train_alignments=flags.FLAGS.train_alignments and os.path.expanduser(flags.FLAGS.train_alignments),
        )
    # Raw data missing or unusable (a corrupt catalog, a malformed tree): the message names the file.
    except (FileNotFoundError, CorpusError, ValueError) as error:
        raise flags.UsageError(str(error)) from None
