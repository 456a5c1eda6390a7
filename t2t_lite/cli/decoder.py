"""t2t-decoder: translate (or parse) with a trained checkpoint, as tensor2tensor's t2t-decoder.

    t2t-decoder --problem=translate_ende --data_dir=D --output_dir=TRAIN_DIR \
        --decode_hparams="beam_size=4,alpha=0.6" --decode_from_file=newstest2014.en --decode_to_file=out.de

Without --decode_from_file or --decode_interactive it decodes a generated split
(--decode_split, default "test") and writes .decodes, .inputs and .targets files.
"""

import os

from absl import app, flags

from t2t_lite import checkpoints, inference, registry
from t2t_lite.cli import flags as t2t_flags
from t2t_lite.hparam import HParamsError

FLAGS = flags.FLAGS
flags.DEFINE_string("decode_from_file", None, "Decode each line of this UTF-8 text file.")
flags.DEFINE_string("decode_to_file", None, "Where to write one output line per input line.")
flags.DEFINE_bool("decode_interactive", False, "Read sentences from stdin and print their decodings.")
flags.DEFINE_enum("decode_split", "test", ["train", "dev", "test"], "The generated split to decode when no file is given.")
flags.DEFINE_string("attention_dir", None, "Also write attention heat-maps (PNG) of every decoded sentence here.")


def main(argv):
    del argv
    t2t_flags.prepare()
    t2t_flags.require("problem", "data_dir")
    model_dir = t2t_flags.trained_model_dir()
    problem = t2t_flags.problem_from_flags()
    try:
        hparams = inference.load_hparams(FLAGS.hparams_set, FLAGS.hparams, model_dir)
        settings = inference.decode_hparams(hparams, problem, FLAGS.decode_hparams)
    except (HParamsError, registry.RegistryError, checkpoints.CheckpointError) as error:
        raise t2t_flags.UsageError(f"--hparams_set/--hparams/--decode_hparams: {error}") from None
    model = inference.load_model(problem, hparams, FLAGS.data_dir, FLAGS.checkpoint_path or FLAGS.output_dir,
                                 FLAGS.model)
    vocabulary = problem.vocabulary(FLAGS.data_dir)
    if FLAGS.decode_interactive:
        inference.decode_interactive(model, vocabulary, settings)
        return
    if FLAGS.decode_from_file:
        lines = inference.read_input_lines(FLAGS.decode_from_file)
        translations = inference.translate(model, vocabulary, lines, settings)
        output = FLAGS.decode_to_file or inference.default_output_path(
            FLAGS.decode_from_file, FLAGS.model, FLAGS.hparams_set, problem.name, settings)
        inference.write_lines(output, (t.line(settings.return_beams) for t in translations))
    else:
        output = FLAGS.decode_to_file or os.path.join(model_dir, f"{problem.name}.{FLAGS.decode_split}.decodes")
        translations = inference.decode_split(model, problem, FLAGS.data_dir, FLAGS.decode_split, settings, output)
    print(f"Wrote {len(translations)} decodings to {output}")
    if FLAGS.attention_dir:
        written = inference.attention_pictures(model, vocabulary, translations, FLAGS.attention_dir)
        print(f"Wrote {len(written)} attention pictures to {FLAGS.attention_dir}")


def console_main():
    app.run(main)
