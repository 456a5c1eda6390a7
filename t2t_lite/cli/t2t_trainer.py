"""t2t-trainer: train (and evaluate) a model on a problem, as tensor2tensor's t2t-trainer.

    t2t-trainer --problem=translate_ende --hparams_set=transformer_base \\
        --data_dir=$DATA_DIR --output_dir=$TRAIN_DIR --train_steps=100000

Rerunning the same command resumes from the latest checkpoint in --output_dir that reads
(one that does not is named and moved to --output_dir/set_aside/), or from
--checkpoint_path=$TRAIN_DIR/ckpt-N of the same run; other --hparams, --problem or --model
there stop with the differences (hparams.json, problem.json). A second run on the same
--output_dir stops at once, naming the one that holds it (`t2t_lite.run_dir.run_lock`).

--warm_start_from=$OTHER_RUN starts a new run from another run's weights (fine-tuning; its
data encoded with that run's vocabulary: t2t-datagen --vocab_from). Each evaluation keeps
the best checkpoint by --eval_early_stopping_metric in $TRAIN_DIR/best/, and
--eval_early_stopping_steps stops the run when that metric stops improving.
"""

import sys

from absl import flags as absl_flags

from t2t_lite.cli import distinct_paths, flags, settings_flags
from t2t_lite.cli.tool_process import exit_at_once
from t2t_lite.data import datagen
from t2t_lite.decode import dev_bleu
from t2t_lite.run_dir import checkpoints, run_lock
from t2t_lite.train import distribution, early_stopping, interruption, run_settings, tf_config, trainer, warm_start

FLAGS = flags.FLAGS

# The run's settings, each defined once as a field of RunSettings (t2t_lite/train/run_settings.py).
settings_flags.define_flags(run_settings.RunSettings, __name__)
absl_flags.DEFINE_bool("generate_data", False, "Generate the problem's data into --data_dir (from --tmp_dir) first.")
absl_flags.DEFINE_integer("eval_bleu_lines", 100, "Dev lines decoded for --eval_early_stopping_metric=bleu.")


def _run_settings() -> run_settings.RunSettings:
    """The flags' RunSettings, checked before any work: a value out of range is a message naming its flag."""
    flags.require("problem", "hparams_set", "data_dir", "output_dir")
    if FLAGS.generate_data:
        flags.require("tmp_dir")
    if FLAGS.eval_bleu_lines < 1:
        raise flags.UsageError(f"--eval_bleu_lines={FLAGS.eval_bleu_lines}: must be at least 1.")
    try:
        return settings_flags.from_flags(
            run_settings.RunSettings, FLAGS, model_name=FLAGS.model, checkpoint_path=FLAGS.checkpoint_path
        )
    except ValueError as error:
        raise flags.UsageError(str(error)) from None


def _check_paths():
    if FLAGS.generate_data:
        flags.writable_dir("tmp_dir")
    (flags.writable_dir if FLAGS.generate_data else flags.existing_dir)("data_dir")
    flags.writable_dir("output_dir")
    distinct_paths.check_distinct({"--data_dir": FLAGS.data_dir}, {"--output_dir": FLAGS.output_dir})
    if FLAGS.checkpoint_path:
        try:
            checkpoints.checkpoint_path(FLAGS.checkpoint_path)
        except checkpoints.CheckpointError as error:
            raise flags.UsageError(f"--checkpoint_path: {error}") from None
    if FLAGS.warm_start_from:
        try:
            warm_start.source_checkpoint(FLAGS.warm_start_from)
        except checkpoints.CheckpointError as error:
            raise flags.UsageError(str(error)) from None


def main(argv):
    del argv
    flags.prepare()
    settings = _run_settings()
    problem = flags.problem_from_flags()
    hparams = flags.hparams_from_flags()
    flags.check_model_flag()
    _check_paths()
    try:
        if FLAGS.generate_data:  # as t2t-datagen: prints what was written and dropped
            datagen.generate(problem, FLAGS.data_dir, FLAGS.tmp_dir)
        distribution.check_strategy(FLAGS.worker_gpu)  # a bad --worker_gpu or TF_CONFIG stops before any work
        trainer.train_and_evaluate(
            problem, hparams, FLAGS.data_dir, FLAGS.output_dir, settings, dev_scorers=_dev_scorers(problem, hparams)
        )
    except (ValueError, FileNotFoundError, checkpoints.CheckpointError) as error:
        raise flags.UsageError(str(error)) from None
    except run_lock.DirectoryInUse as error:
        raise SystemExit(f"t2t-trainer: --output_dir: {error}") from None
    except trainer.TrainingError as error:
        raise SystemExit(f"t2t-trainer: {error}") from None
    except interruption.Interrupted as error:  # SIGINT or SIGTERM: the step reached is saved
        print(f"t2t-trainer: {error}", file=sys.stderr)
        raise SystemExit(error.exit_code) from None
    except distribution.WORKER_FAILURES as error:  # under TF_CONFIG: a worker stopped; say to relaunch all
        if not tf_config.is_multi_worker():
            raise
        print(f"t2t-trainer: {distribution.lost_worker_message(error, FLAGS.output_dir)}", file=sys.stderr)
        exit_at_once(1)


def _dev_scorers(problem, hparams) -> tuple:
    """The dev decoding of --eval_early_stopping_metric=bleu, read before training starts."""
    if FLAGS.eval_early_stopping_metric not in early_stopping.DECODED_METRICS:
        return ()
    settings = flags.decode_settings(hparams, problem)  # checked now, not at the first evaluation hours later
    return (dev_bleu.DevBleu(problem, FLAGS.data_dir, settings, FLAGS.eval_bleu_lines),)
