"""t2t-exporter: write a SavedModel that translates raw text, for TF Serving.

    t2t-exporter --problem=translate_ende --data_dir=$DATA_DIR --output_dir=$TRAIN_DIR \
        --export_dir=$TRAIN_DIR/export --decode_hparams="beam_size=4,alpha=0.6,max_input_length=256"

writes $TRAIN_DIR/export/<step of the latest checkpoint>/ (or of --checkpoint_path), the
layout TF Serving watches, with its warm-up requests in assets.extra/. `xla=true` in
--decode_hparams exports the XLA-compiled beam search over fixed length and batch buckets
(TF Serving: --xla_cpu_compilation_enabled=true). See `t2t_lite.serve.export` for the
signatures and settings. One run at a time writes --export_dir (`t2t_lite.train.run_lock`).
"""

from absl import app
from absl import flags as absl_flags

from t2t_lite.cli import flags
from t2t_lite.hparam import HParamsError
from t2t_lite.serve import export
from t2t_lite.train import run_lock

FLAGS = flags.FLAGS

absl_flags.DEFINE_string("export_dir", None, "Base directory of the exports; each goes to <export_dir>/<step>/.")


def main(argv):
    del argv
    flags.prepare()
    flags.require("problem", "data_dir", "export_dir")
    model_dir = flags.trained_model_dir()
    _check_paths()
    try:
        with run_lock.directory_lock(FLAGS.export_dir, "t2t-exporter"):
            _export(model_dir)
    except run_lock.DirectoryInUse as error:
        raise SystemExit(f"t2t-exporter: --export_dir: {error}") from None


def _check_paths():
    flags.existing_dir("data_dir")
    if FLAGS.output_dir:
        flags.existing_dir("output_dir")
    flags.writable_dir("export_dir")


def _export(model_dir):
    problem = flags.problem_from_flags()
    flags.check_model_flag()
    hparams = flags.trained_hparams(model_dir)
    try:
        export.export_model(
            problem,
            hparams,
            FLAGS.data_dir,
            FLAGS.checkpoint_path or FLAGS.output_dir,
            FLAGS.export_dir,
            FLAGS.decode_hparams,
            FLAGS.model,
        )
    except HParamsError as error:
        raise flags.UsageError(f"--decode_hparams: {error}") from None
    except (FileNotFoundError, export.ExportError, ValueError) as error:  # CheckpointError is a FileNotFoundError
        raise flags.UsageError(str(error)) from None


def console_main():
    app.run(main)
