"""t2t-exporter: write a SavedModel that translates raw text, for TF Serving, or a CTranslate2 model.

    t2t-exporter --problem=translate_ende --data_dir=$DATA_DIR --output_dir=$TRAIN_DIR \
        --export_dir=$TRAIN_DIR/export --decode_hparams="beam_size=4,alpha=0.6,max_input_length=256"

writes $TRAIN_DIR/export/<step of the latest checkpoint>/ (or of --checkpoint_path), the
layout TF Serving watches, with its warm-up requests in assets.extra/. `xla=true` in
--decode_hparams exports the XLA-compiled beam search over fixed length and batch buckets
(TF Serving: --xla_cpu_compilation_enabled=true); `max_batch_size=16` keeps the batch buckets at
1, 4, 8, 16, as TF Serving's batching config of that size. See `t2t_lite.serve.export` for the
signatures and settings. One run at a time writes --export_dir (`t2t_lite.run_dir.run_lock`).

    t2t-exporter ... --export_format=ctranslate2 --ct2_quantization=int8

writes a CTranslate2 model directory (model.bin, config.json, shared_vocabulary.json) and the
SentencePiece model into the same <export_dir>/<step>/ layout instead; see
`t2t_lite.serve.ctranslate2_export`. It needs the optional ctranslate2 package.
"""

from absl import flags as absl_flags

from t2t_lite.cli import distinct_paths, flags
from t2t_lite.hparam import HParamsError
from t2t_lite.run_dir import run_lock
from t2t_lite.serve import ctranslate2_export, export

FLAGS = flags.FLAGS

absl_flags.DEFINE_string("export_dir", None, "Base directory of the exports; each goes to <export_dir>/<step>/.")
absl_flags.DEFINE_enum(
    "export_format",
    "savedmodel",
    ["savedmodel", "ctranslate2"],
    "savedmodel: a SavedModel for TF Serving; ctranslate2: a CTranslate2 model directory and the SentencePiece model.",
)
absl_flags.DEFINE_string(
    "ct2_quantization",
    "",
    f"With --export_format=ctranslate2: the weights' type, one of "
    f"{', '.join(ctranslate2_export.QUANTIZATIONS)}; empty = float32 as trained.",
)


def main(argv):
    del argv
    flags.prepare()
    flags.require("problem", "data_dir", "export_dir")
    model_dir = flags.trained_model_dir()
    _check_format()
    _check_paths(model_dir)
    try:
        with run_lock.directory_lock(FLAGS.export_dir, "t2t-exporter"):
            _export(model_dir)
    except run_lock.DirectoryInUse as error:
        raise SystemExit(f"t2t-exporter: --export_dir: {error}") from None


def _check_format():
    if FLAGS.export_format != "ctranslate2":
        if FLAGS.ct2_quantization:
            raise flags.UsageError("--ct2_quantization: only with --export_format=ctranslate2.")
        return
    try:
        ctranslate2_export.check_installed()
        ctranslate2_export.check_quantization(FLAGS.ct2_quantization)
    except export.ExportError as error:
        raise flags.UsageError(str(error)) from None


def _check_paths(model_dir):
    flags.existing_dir("data_dir")
    if FLAGS.output_dir:
        flags.existing_dir("output_dir")
    flags.writable_dir("export_dir")
    # An export inside the run's own directory would also take the lock t2t-trainer holds there.
    model_flag = "--output_dir" if FLAGS.output_dir else "--checkpoint_path's directory"
    distinct_paths.check_distinct(
        {model_flag: model_dir, "--data_dir": FLAGS.data_dir}, {"--export_dir": FLAGS.export_dir}
    )


def _export(model_dir):
    problem = flags.problem_from_flags()
    flags.check_model_flag()
    hparams = flags.trained_hparams(model_dir)
    checkpoint = FLAGS.checkpoint_path or FLAGS.output_dir
    try:
        if FLAGS.export_format == "ctranslate2":
            ctranslate2_export.export_ctranslate2(
                problem,
                hparams,
                FLAGS.data_dir,
                checkpoint,
                FLAGS.export_dir,
                FLAGS.ct2_quantization,
                FLAGS.decode_hparams,
                FLAGS.model,
            )
        else:
            export.export_model(
                problem, hparams, FLAGS.data_dir, checkpoint, FLAGS.export_dir, FLAGS.decode_hparams, FLAGS.model
            )
    except HParamsError as error:
        raise flags.UsageError(f"--decode_hparams: {error}") from None
    except (FileNotFoundError, export.ExportError, ValueError) as error:  # CheckpointError is a FileNotFoundError
        raise flags.UsageError(str(error)) from None
