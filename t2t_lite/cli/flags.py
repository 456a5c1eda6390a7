"""Flags shared by every t2t-* tool, with tensor2tensor's names.

Each tool imports this module (which defines the flags once) and calls
`prepare()` at the top of its `main`, so `--t2t_usr_dir` and `--registry_help`
behave the same everywhere. A bad value stops the tool before any work with a
message that names the flag.
"""

import os
import sys

from absl import app, flags

from t2t_lite import registry
from t2t_lite.hparam import HParamsError

FLAGS = flags.FLAGS

flags.DEFINE_string(
    "t2t_usr_dir", "", "Path to a Python package whose imports register more problems, hparams sets or models."
)
flags.DEFINE_bool("registry_help", False, "Print every registered problem, hparams set and model, then exit.")
flags.DEFINE_string("problem", None, "Registered problem name (add '_rev' for the reverse direction).")
flags.DEFINE_string("model", "transformer", "Registered model name.")
flags.DEFINE_string("hparams_set", None, "Registered hparams set, e.g. transformer_base.")
flags.DEFINE_string(
    "hparams", "", 'Comma-separated overrides of the hparams set, e.g. "num_heads=16,layer_prepostprocess_dropout=0.3".'
)
flags.DEFINE_string("data_dir", None, "Directory of the generated TFRecord files and vocabulary.")
flags.DEFINE_string("tmp_dir", None, "Directory for raw downloaded or user-supplied data.")
flags.DEFINE_string("output_dir", None, "Directory of the model's checkpoints and hparams.json.")
# Used by the tools that read checkpoints: t2t-decoder and t2t-exporter load it, t2t-trainer resumes
# from it (a checkpoint of its own --output_dir), t2t-avg-all averages the last --n up to it.
flags.DEFINE_string(
    "checkpoint_path", None, "A checkpoint prefix (ckpt-N) to use; default: the latest in --output_dir."
)
# Shared by several tools, so that any of them can be imported beside the others (absl defines a flag once).
flags.DEFINE_string(
    "model_dir",
    None,
    "Directory of a run's checkpoints (t2t-trainer's --output_dir): "
    "what t2t-avg-all averages and t2t-translate-all translates with.",
)
flags.DEFINE_string(
    "translations_dir",
    None,
    "Directory of translations, one file per checkpoint step "
    "(<source>-<step>): written by t2t-translate-all, scored by t2t-bleu.",
)
flags.DEFINE_string("decode_hparams", "", 'Decoding settings, e.g. "beam_size=4,alpha=0.6,extra_length=50".')
flags.DEFINE_integer(
    "min_steps",
    -1,
    "Leave out checkpoints of fewer steps. -1 (default): t2t-avg-all leaves out those of eq. 3's warm-up "
    "(learning_rate_warmup_steps of --model_dir's hparams.json), t2t-translate-all none.",
)


class UsageError(app.UsageError):
    """A flag value that cannot work; absl prints it with the tool's usage and exits 1."""


def prepare() -> None:
    """Imports --t2t_usr_dir and answers --registry_help; call first in every tool's main."""
    try:
        registry.import_usr_dir(FLAGS.t2t_usr_dir)
    except (FileNotFoundError, ImportError) as error:
        raise UsageError(str(error)) from None
    if FLAGS.registry_help:
        print(registry.help_string())
        sys.exit(0)


def require(*names: str) -> None:
    """Stops with a message naming every required flag that is missing."""
    missing = [f"--{name}" for name in names if not getattr(FLAGS, name)]
    if missing:
        raise UsageError(f"Missing required flag(s): {', '.join(missing)}.")


def trained_model_dir() -> str:
    """The training directory of --output_dir or --checkpoint_path (where hparams.json lies)."""
    if not (FLAGS.output_dir or FLAGS.checkpoint_path):
        raise UsageError("Give --output_dir (the training directory) or --checkpoint_path.")
    if FLAGS.output_dir:
        return FLAGS.output_dir
    if os.path.isdir(FLAGS.checkpoint_path):  # a directory: its latest checkpoint
        return FLAGS.checkpoint_path
    return os.path.dirname(FLAGS.checkpoint_path)


def hparams_from_flags():
    """--hparams_set plus --hparams, with errors that name the flag."""
    try:
        hparams = registry.hparams(FLAGS.hparams_set)
    except registry.RegistryError as error:
        raise UsageError(f"--hparams_set: {error}") from None
    note = registry.retired_note(FLAGS.hparams_set)
    if note:
        print(f"WARNING: --hparams_set={FLAGS.hparams_set}: {note}", file=sys.stderr)
    try:
        return hparams.override(FLAGS.hparams)
    except HParamsError as error:
        raise UsageError(f"--hparams: {error}") from None


def check_model_flag() -> None:
    """Stops on an unknown --model before any work."""
    try:
        registry.model(FLAGS.model)
    except registry.RegistryError as error:
        raise UsageError(f"--model: {error}") from None


def trained_hparams(model_dir: str):
    """--hparams_set (+ --hparams) if given, else the hparams.json beside the checkpoints (+ --hparams)."""
    from t2t_lite.decode import model_loading  # TensorFlow: only for the tools that load a model
    from t2t_lite.run_dir import checkpoints

    try:
        return model_loading.load_hparams(FLAGS.hparams_set, FLAGS.hparams, model_dir)
    except registry.RegistryError as error:
        raise UsageError(f"--hparams_set: {error}") from None
    except HParamsError as error:
        raise UsageError(f"--hparams: {error}") from None
    except checkpoints.CheckpointError as error:
        raise UsageError(f"{error} (or give --hparams_set and --hparams)") from None


def decode_settings(hparams, problem):
    """--decode_hparams over the problem's defaults (t2t-decoder, t2t-insights, t2t-translate-all)."""
    from t2t_lite.decode import quantization, search_settings  # TensorFlow: only for the tools that decode
    from t2t_lite.decode.decode_settings import decode_hparams

    try:
        settings = decode_hparams(hparams, problem, FLAGS.decode_hparams)
        if settings.search.sampling_keep_top_k > 0:  # the vocabulary, read without the model's weights
            search_settings.check_vocabulary(settings.search, problem.vocab_size(FLAGS.data_dir))
    except (ValueError, FileNotFoundError) as error:  # HParamsError names --decode_hparams; a missing vocabulary
        raise UsageError(str(error)) from None
    note = quantization.speed_note(settings.quantize, settings.search.xla)
    if note:
        print(note, file=sys.stderr)
    return settings


def trained_model(problem, hparams, quantize: str = ""):
    """The vocabulary and the model of --checkpoint_path (or the latest in --output_dir); errors name the file.

    `quantize` is the decode settings' (e.g. "int8"), applied once the float32 weights are restored.
    """
    from t2t_lite.decode import model_loading

    try:
        vocabulary = problem.vocabulary(FLAGS.data_dir)
        model = model_loading.load_model_for_decoding(
            problem, hparams, FLAGS.data_dir, FLAGS.checkpoint_path or FLAGS.output_dir, FLAGS.model, quantize
        )
    except FileNotFoundError as error:  # CheckpointError too
        raise UsageError(str(error)) from None
    return vocabulary, model


def problem_from_flags():
    """--problem as a Problem instance, with an error that names the flag."""
    try:
        return registry.problem(FLAGS.problem)
    except registry.RegistryError as error:
        raise UsageError(f"--problem: {error}") from None


# Paths are checked when a tool starts, so a mistyped or unwritable path stops it before hours of
# work. Remote paths (gs://, s3://, hdfs://) are left to TensorFlow's file system, which checks
# them on first use; only local paths can be checked cheaply here.
def _is_remote(path: str) -> bool:
    return "://" in path


def existing_file(name: str) -> str:
    """The file named by --name; stops if it is missing or is a directory."""
    return _existing(name, directory=False)


def existing_dir(name: str) -> str:
    """The directory named by --name; stops if it is missing or is a file."""
    return _existing(name, directory=True)


def _existing(name: str, directory: bool) -> str:
    path = getattr(FLAGS, name)
    kind = "directory" if directory else "file"
    if _is_remote(path):
        return path
    if not os.path.exists(path):
        raise UsageError(f"--{name}={path}: no such {kind}.")
    if os.path.isdir(path) != directory:
        raise UsageError(f"--{name}={path}: is a {'file' if directory else 'directory'}; give a {kind}.")
    return path


def writable_dir(name: str) -> str:
    """The directory named by --name, which may not exist yet; stops unless it can be created and written."""
    path = getattr(FLAGS, name)
    if _is_remote(path):
        return path
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"--{name}={path}: is a file; give a directory.")
    _check_writable(name, path)
    return path


def writable_file(name: str) -> str:
    """The file named by --name, which may not exist yet; stops if it is a directory or cannot be written."""
    path = getattr(FLAGS, name)
    if _is_remote(path):
        return path
    if os.path.isdir(path):
        raise UsageError(f"--{name}={path}: is a directory; give a file name.")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"--{name}={path}: its directory {parent} does not exist; create it first.")
    _check_writable(name, path if os.path.exists(path) else parent)
    return path


def _check_writable(name: str, path: str) -> None:
    """Stops unless `path`, or the nearest directory above it that exists, can be written."""
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing) and existing != os.path.abspath(path):
        raise UsageError(f"--{name}={path}: {existing} is a file, so the directory cannot be created.")
    if not os.access(existing, os.W_OK):
        raise UsageError(
            f"--{name}={path}: {existing} is not writable by this user; choose another path or change its permissions."
        )
