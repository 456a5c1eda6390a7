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

from t2t_lite.cli import flags
from t2t_lite.cli.tool_process import exit_at_once
from t2t_lite.data import datagen
from t2t_lite.decode import dev_bleu, inference
from t2t_lite.run_dir import checkpoints, run_lock
from t2t_lite.train import distribution, early_stopping, interruption, tf_config, trainer, warm_start

FLAGS = flags.FLAGS

absl_flags.DEFINE_integer(
    "train_steps", 250000, "Optimizer updates to train for (the paper: 100,000 base, 300,000 big)."
)
absl_flags.DEFINE_integer("eval_steps", 100, "Dev batches per evaluation; 0 = the whole dev split.")
absl_flags.DEFINE_integer("local_eval_frequency", 1000, "Evaluate every this many steps (schedule train_and_evaluate).")
absl_flags.DEFINE_integer("save_checkpoints_steps", 1000, "Write a checkpoint every this many steps.")
absl_flags.DEFINE_integer(
    "save_checkpoints_secs",
    0,
    "If > 0, write a checkpoint every this many seconds instead of "
    "every --save_checkpoints_steps (§6.1's 10-minute checkpoints: 600).",
)
absl_flags.DEFINE_integer("keep_checkpoint_max", 20, "Keep this many latest checkpoints (t2t-avg-all averages them).")
absl_flags.DEFINE_enum(
    "schedule",
    "train_and_evaluate",
    list(trainer.SCHEDULES),
    "train, evaluate (the latest checkpoint, once) or train_and_evaluate.",
)
absl_flags.DEFINE_bool("generate_data", False, "Generate the problem's data into --data_dir (from --tmp_dir) first.")
absl_flags.DEFINE_integer(
    "worker_gpu", 1, "Local GPUs to mirror the model on (MultiWorkerMirroredStrategy under TF_CONFIG)."
)
absl_flags.DEFINE_integer("random_seed", 1, "Seed of weight initialisation, dropout and the data order.")
absl_flags.DEFINE_float(
    "train_minutes", 0.0, "Stop after about this many minutes with a final checkpoint; 0 = no bound."
)
absl_flags.DEFINE_bool(
    "fit_train_steps_to_minutes",
    False,
    "Choose the step count (at most --train_steps) from the "
    "measured step time so that hparam learning_rate_decay_steps' decay ends within --train_minutes; "
    "the log names the count, which --train_steps replays on any host.",
)
absl_flags.DEFINE_string(
    "warm_start_from",
    None,
    "Start a new run in --output_dir from this checkpoint's model weights (a ckpt-N prefix, or a run "
    "directory: its latest); fresh optimizer, step counter and schedule. Same vocabulary and model.",
)
absl_flags.DEFINE_integer(
    "eval_early_stopping_steps",
    0,
    "Stop when --eval_early_stopping_metric has not improved for this many steps (evaluated every "
    "--local_eval_frequency); 0 = never stop early.",
)
absl_flags.DEFINE_enum(
    "eval_early_stopping_metric",
    "loss",
    sorted(early_stopping.LOWER_IS_BETTER),
    "The dev metric that chooses --output_dir/best/ and stops early; bleu decodes the dev split's first "
    "--eval_bleu_lines lines with --decode_hparams.",
)
absl_flags.DEFINE_float(
    "eval_early_stopping_metric_delta", 0.0, "The least change of the metric that counts as an improvement."
)
absl_flags.DEFINE_bool(
    "eval_early_stopping_metric_minimize",
    None,
    "Whether lower is better; default: the metric's own (loss, perplexity lower; the others higher).",
)
absl_flags.DEFINE_integer("eval_bleu_lines", 100, "Dev lines decoded for --eval_early_stopping_metric=bleu.")
absl_flags.DEFINE_float(
    "cluster_start_minutes",
    15.0,
    "Under TF_CONFIG: stop if the workers have not all joined "
    "within this many minutes, naming those waited for; 0 = wait for ever.",
)


def _check_flags():
    flags.require("problem", "hparams_set", "data_dir", "output_dir")
    for name in ("train_steps", "save_checkpoints_steps", "keep_checkpoint_max", "worker_gpu"):
        if getattr(FLAGS, name) < 1:
            raise flags.UsageError(f"--{name}={getattr(FLAGS, name)}: must be at least 1.")
    for name in (
        "eval_steps",
        "local_eval_frequency",
        "train_minutes",
        "save_checkpoints_secs",
        "cluster_start_minutes",
    ):
        if getattr(FLAGS, name) < 0:
            raise flags.UsageError(f"--{name}={getattr(FLAGS, name)}: must be zero or positive.")
    if FLAGS.generate_data:
        flags.require("tmp_dir")
    judged = FLAGS.eval_early_stopping_steps or FLAGS["eval_early_stopping_metric"].present
    if judged and FLAGS.schedule != "train_and_evaluate":
        raise flags.UsageError(
            f"--eval_early_stopping_* with --schedule={FLAGS.schedule}: early stopping and best/ judge "
            f"evaluations during training; use --schedule=train_and_evaluate."
        )
    if FLAGS.warm_start_from and FLAGS.schedule == "evaluate":
        raise flags.UsageError("--warm_start_from starts a run to train; --schedule=evaluate trains none.")
    if FLAGS.eval_bleu_lines < 1:
        raise flags.UsageError(f"--eval_bleu_lines={FLAGS.eval_bleu_lines}: must be at least 1.")


def _check_paths():
    if FLAGS.generate_data:
        flags.writable_dir("tmp_dir")
    (flags.writable_dir if FLAGS.generate_data else flags.existing_dir)("data_dir")
    flags.writable_dir("output_dir")
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
    _check_flags()
    problem = flags.problem_from_flags()
    hparams = flags.hparams_from_flags()
    flags.check_model_flag()
    _check_paths()
    try:
        if FLAGS.generate_data:  # as t2t-datagen: prints what was written and dropped
            datagen.generate(problem, FLAGS.data_dir, FLAGS.tmp_dir)
        distribution.check_strategy(FLAGS.worker_gpu)  # a bad --worker_gpu or TF_CONFIG stops before any work
        settings = trainer.RunSettings(
            train_steps=FLAGS.train_steps,
            eval_steps=FLAGS.eval_steps,
            local_eval_frequency=FLAGS.local_eval_frequency,
            save_checkpoints_steps=FLAGS.save_checkpoints_steps,
            save_checkpoints_secs=FLAGS.save_checkpoints_secs,
            keep_checkpoint_max=FLAGS.keep_checkpoint_max,
            schedule=FLAGS.schedule,
            worker_gpu=FLAGS.worker_gpu,
            random_seed=FLAGS.random_seed,
            train_minutes=FLAGS.train_minutes,
            fit_train_steps_to_minutes=FLAGS.fit_train_steps_to_minutes,
            model_name=FLAGS.model,
            checkpoint_path=FLAGS.checkpoint_path,
            cluster_start_minutes=FLAGS.cluster_start_minutes,
            warm_start_from=FLAGS.warm_start_from,
            early_stopping=early_stopping.EarlyStopping(
                FLAGS.eval_early_stopping_metric,
                FLAGS.eval_early_stopping_steps,
                FLAGS.eval_early_stopping_metric_delta,
                FLAGS.eval_early_stopping_metric_minimize,
            ),
        )
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
    settings = inference.decode_hparams(hparams, problem, FLAGS.decode_hparams)
    return (dev_bleu.DevBleu(problem, FLAGS.data_dir, settings, FLAGS.eval_bleu_lines),)
