"""t2t-datagen: write a problem's vocabulary and TFRecord files, as tensor2tensor's tool.

    t2t-datagen --problem=translate_ende_gettext --data_dir=~/t2t_data --tmp_dir=/tmp/t2t_raw

Reuses whatever a previous run left in --data_dir; prints how many pairs were
written and dropped, and why. `--problem=P_rev` generates P's files (the reverse
direction reads the same files with inputs and targets swapped).
"""

import os

from absl import app

from t2t_lite import datagen, registry
from t2t_lite.cli import flags
from t2t_lite.problems.translate_files import CorpusError


def main(argv):
    del argv
    flags.prepare()
    flags.require("problem", "data_dir", "tmp_dir")
    problem = flags.problem_from_flags()
    if problem.was_reversed:
        problem = registry.problem(problem.base_name)
    data_dir = os.path.expanduser(flags.FLAGS.data_dir)
    tmp_dir = os.path.expanduser(flags.FLAGS.tmp_dir)
    try:
        datagen.generate(problem, data_dir, tmp_dir)
    # Raw data missing or unusable (a corrupt catalog, a malformed tree): the message names the file.
    except (FileNotFoundError, CorpusError, ValueError) as error:
        raise flags.UsageError(str(error)) from None


def console_main():
    app.run(main)
