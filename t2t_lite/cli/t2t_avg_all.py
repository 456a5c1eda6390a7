"""t2t-avg-all: average the last N checkpoints of a model directory (§6.1).

    t2t-avg-all --model_dir=$TRAIN_DIR --output_dir=$TRAIN_DIR/avg --n=5    # base; --n=20 for big

The result is a checkpoint `ckpt-<newest step>` in --output_dir with hparams.json and
problem.json beside it, which t2t-decoder and t2t-exporter load like any other. Averages
of later steps join earlier ones there (all listed, the newest loaded by default); it
never overwrites: --output_dir must not be --model_dir, must not hold an average of the
same step already, nor averages of another model. --checkpoint_path=$TRAIN_DIR/ckpt-K
averages the N up to ckpt-K (e.g. when a later one is damaged). One run at a time writes
--output_dir (`t2t_lite.run_dir.run_lock`).

Which checkpoints count (`t2t_lite.run_dir.averaging.chosen_checkpoints`): not ckpt-0, not those
before --min_steps, and not a periodic checkpoint that the final one follows within half the
save interval. tensor2tensor's --min_steps defaulted to 0; here it defaults to the end of eq. 3's
warm-up (hparam learning_rate_warmup_steps in --model_dir's hparams.json), so a short run's
result is not pulled back towards the weights of its warm-up; --min_steps=0 averages them too.
Each checkpoint left out is named, with why.
"""

import os

from absl import flags as absl_flags

from t2t_lite.cli import distinct_paths, flags
from t2t_lite.run_dir import averaging, checkpoints, model_info, run_lock

FLAGS = flags.FLAGS

absl_flags.DEFINE_integer("n", 5, "How many of the last checkpoints to average (the paper: 5 for base, 20 for big).")


def main(argv):
    del argv
    flags.prepare()
    flags.require("model_dir", "output_dir")
    if FLAGS.n < 1:
        raise flags.UsageError(f"--n={FLAGS.n}: must be at least 1.")
    if FLAGS.min_steps < -1:
        raise flags.UsageError(
            f"--min_steps={FLAGS.min_steps}: give a step count, 0 for none, or -1 for the warm-up's end."
        )
    flags.existing_dir("model_dir")
    flags.writable_dir("output_dir")
    distinct_paths.check_distinct({"--model_dir": FLAGS.model_dir}, {"--output_dir": FLAGS.output_dir})
    try:
        min_step = _min_step(FLAGS.model_dir, FLAGS.min_steps)
        with run_lock.directory_lock(FLAGS.output_dir, "t2t-avg-all"):
            averaging.average_checkpoints(
                FLAGS.model_dir, FLAGS.output_dir, FLAGS.n, FLAGS.checkpoint_path, min_step=min_step
            )
    except checkpoints.CheckpointError as error:
        raise flags.UsageError(str(error)) from None
    except run_lock.DirectoryInUse as error:
        raise SystemExit(f"t2t-avg-all: --output_dir: {error}") from None


def _min_step(model_dir: str, min_steps: int) -> int:
    """--min_steps, or for -1 the model's warm-up length (0 where --model_dir has no hparams.json)."""
    if min_steps >= 0:
        return min_steps
    if not os.path.exists(os.path.join(model_dir, model_info.HPARAMS_FILE)):
        return 0
    return model_info.read_hparams(model_dir).learning_rate_warmup_steps
