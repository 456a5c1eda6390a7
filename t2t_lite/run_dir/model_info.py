"""What a model directory records about its model, and the model those records build.

Beside its checkpoints, `t2t-trainer` writes into `--output_dir`:
  hparams.json    `HParams.to_json()`, so every tool rebuilds the same model
  problem.json    problem, model, vocabulary size and the vocabulary's fingerprint

`build_model` makes the registered model with its variables, `restore_model` restores a
checkpoint's weights into it, and `check_same_run` / `check_trained_with` stop a run or a tool
whose problem, model, vocabulary or hparams differ from the recorded ones: restored under
another vocabulary of the same size, a model would decode garbage without any error. Both
files are written to a temporary file and renamed, so a killed run never leaves half of one.
"""

import json
import os

import tensorflow as tf

from t2t_lite import registry
from t2t_lite.hparam import HParams, HParamsError
from t2t_lite.run_dir.checkpoints import CheckpointError, checkpoint_path, restore_weights

HPARAMS_FILE = "hparams.json"
PROBLEM_FILE = "problem.json"


# -- Writing, when a run starts ---------------------------------------------------------
def write_model_info(
    output_dir: str, hparams: HParams, problem_name: str, model_name: str, vocab_size: int, vocabulary: str = None
):
    """Writes hparams.json and problem.json beside the checkpoints (atomically).

    `vocabulary` is the vocabulary's fingerprint (`Vocabulary.fingerprint`): a vocabulary
    regenerated from other data has the same size but other pieces.
    """
    tf.io.gfile.makedirs(output_dir)
    atomic_write(os.path.join(output_dir, HPARAMS_FILE), hparams.to_json())
    info = {"problem": problem_name, "model": model_name, "vocab_size": int(vocab_size)}
    if vocabulary is not None:
        info["vocabulary"] = vocabulary
    atomic_write(os.path.join(output_dir, PROBLEM_FILE), json.dumps(info, indent=2, sort_keys=True))


def atomic_write(path: str, text: str) -> None:
    # tf.io.gfile, so a model directory may be gs://... as the checkpoints' own files may.
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with tf.io.gfile.GFile(temporary, "w") as file:
            file.write(text + "\n")
        tf.io.gfile.rename(temporary, path, overwrite=True)
    except BaseException:  # a full disk: the old file stays, and no half of the new one
        if tf.io.gfile.exists(temporary):
            tf.io.gfile.remove(temporary)
        raise


# -- Reading, for the decoder, the exporter and t2t-avg-all ------------------------------
def read_hparams(model_dir: str) -> HParams:
    """The hparams recorded in `model_dir`; a missing or damaged hparams.json stops with its name and field."""
    try:
        return HParams.from_json(_read_record(model_dir, HPARAMS_FILE))
    except HParamsError as error:
        raise _damaged(model_dir, HPARAMS_FILE, error) from None


def read_problem_info(model_dir: str) -> dict:
    """{"problem": ..., "model": ..., "vocab_size": ...} as written by t2t-trainer."""
    try:
        info = json.loads(_read_record(model_dir, PROBLEM_FILE))
    except json.JSONDecodeError as error:
        raise _damaged(model_dir, PROBLEM_FILE, f"not JSON ({error})") from None
    if not isinstance(info, dict):
        raise _damaged(model_dir, PROBLEM_FILE, "not a JSON object")
    return info


def json_object(path: str) -> dict:
    """The JSON object in the file `path` ({} when there is no such file); ValueError says why it is none."""
    if not tf.io.gfile.exists(path):
        return {}
    with tf.io.gfile.GFile(path) as file:
        record = json.loads(file.read())
    if not isinstance(record, dict):
        raise ValueError(f"a JSON {type(record).__name__}, not an object")
    return record


def _damaged(model_dir: str, name: str, what) -> CheckpointError:
    return CheckpointError(
        f"{os.path.join(model_dir, name)}: {what}. t2t-trainer wrote it to record how the checkpoints beside it "
        f"were trained; restore it from a copy."
    )


def _read_record(model_dir: str, name: str) -> str:
    path = os.path.join(model_dir, name)
    if not tf.io.gfile.exists(path):
        raise CheckpointError(f"{path}: missing; it is written by t2t-trainer beside the checkpoints.")
    with tf.io.gfile.GFile(path) as file:
        return file.read()


# -- The model they build --------------------------------------------------------------
def build_model(hparams: HParams, vocab_size: int, model_name: str = "transformer"):
    """The registered model, with its variables created by one call on a dummy batch."""
    model = registry.model(model_name)(hparams, vocab_size)
    dummy = tf.ones([1, 2], tf.int32)
    model({"inputs": dummy, "targets": dummy}, training=False)
    return model


def restore_model(
    checkpoint_path_or_dir: str,
    hparams: HParams,
    vocab_size: int,
    model_name: str = "transformer",
    problem_name: str = None,
    vocabulary: str = None,
):
    """Builds the model and restores its weights only (no optimizer state) from a checkpoint.

    The problem.json beside the checkpoint (when there is one) must name the same problem
    (if `problem_name` is given), model, vocabulary size and vocabulary (if its fingerprint
    is given): a checkpoint restored under another vocabulary of the same size would decode
    garbage without any error.
    """
    path = checkpoint_path(checkpoint_path_or_dir)
    check_trained_with(os.path.dirname(path), problem_name, model_name, vocab_size, vocabulary)
    model = build_model(hparams, vocab_size, model_name)
    restore_weights(model, path)
    return model


# -- A run or a checkpoint against the records ----------------------------------------------
def check_same_run(
    output_dir: str, hparams: HParams, problem_name: str, model_name: str, vocab_size: int, vocabulary: str = None
) -> None:
    """Stops a resumed run whose settings differ from those recorded in `output_dir`.

    Resuming under other hparams would either fail on the first weight's shape or, where
    the shapes agree (another dropout, another number of heads), train on silently and
    overwrite hparams.json, the only record of how the earlier steps were trained.
    """
    if tf.io.gfile.exists(os.path.join(output_dir, HPARAMS_FILE)):
        recorded = read_hparams(output_dir).values()
        changed = [
            f"{name} {recorded.get(name)!r} → {value!r}"
            for name, value in hparams.values().items()
            if recorded.get(name) != value
        ]
        if changed:
            raise CheckpointError(
                f"--output_dir={output_dir} holds a run trained with other hparams ({'; '.join(changed)}). "
                f"Resume it with the --hparams_set and --hparams of {os.path.join(output_dir, HPARAMS_FILE)}, "
                f"or give a new --output_dir."
            )
    check_trained_with(output_dir, problem_name, model_name, vocab_size, vocabulary)


def check_trained_with(model_dir: str, problem_name, model_name: str, vocab_size: int, vocabulary=None) -> None:
    """Stops when problem.json in `model_dir` records another problem, model, vocabulary size or vocabulary."""
    if not tf.io.gfile.exists(os.path.join(model_dir, PROBLEM_FILE)):
        return  # a checkpoint written by other code: the restore itself checks the shapes
    info = read_problem_info(model_dir)
    given = {
        "problem": (problem_name, "--problem"),
        "model": (model_name, "--model"),
        "vocab_size": (vocab_size, "--problem and --data_dir (the vocabulary)"),
        "vocabulary": (vocabulary, "--data_dir (whose vocab.*.model file)"),
    }
    for key, (value, flag) in given.items():
        if value is not None and key in info and info[key] != value:
            raise CheckpointError(
                f"{os.path.join(model_dir, PROBLEM_FILE)}: the checkpoint was trained with {key} {info[key]!r}, "
                f"not {value!r}; give the {flag} it was trained with, or another directory."
            )
