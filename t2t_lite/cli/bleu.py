"""t2t-bleu: BLEU and chrF of a detokenized translation file against its reference (§6.1).

    t2t-bleu --translation=newstest2014.decoded.de --reference=newstest2014.de

Prints sacreBLEU with its signature (the figure to report), chrF, and the BLEU of
the paper's tokenized evaluation (`t2t_lite.bleu`), which is not comparable with
sacreBLEU.
"""

from absl import app, flags as absl_flags

from t2t_lite import bleu
from t2t_lite.cli import flags

FLAGS = flags.FLAGS

absl_flags.DEFINE_string("translation", None, "File of detokenized translations, one sentence per line.")
absl_flags.DEFINE_string("reference", None, "File of reference translations, line i translating the same source.")


def main(argv):
    del argv
    flags.prepare()
    flags.require("translation", "reference")
    try:
        print(bleu.evaluate_files(FLAGS.translation, FLAGS.reference))
    except (OSError, ValueError) as error:  # unreadable, not UTF-8 (file:line), or line counts differ
        raise flags.UsageError(str(error)) from None


def console_main():
    app.run(main)
