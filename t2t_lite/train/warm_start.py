"""Warm start: a new run that begins from another run's weights (fine-tuning, tensor2tensor's --warm_start_from).

Not the paper (§5 trains each model from scratch); what a researcher does next with a trained
model: adapt it to in-domain data. The new run, in its own `--output_dir`, takes the
source checkpoint's trainable weights only; its optimizer (Adam's moments), step counter, eq. 3
schedule (warm-up from step 1 again), data position and dropout seeds start afresh, so its
first update is θ_source moved by a fresh Adam step at lrate(1).

The source run is only read. Its records (`t2t_lite.run_dir.model_info`) must show the same
model: the same vocabulary (by fingerprint: the new corpus is encoded with the source's
vocabulary, see `t2t-datagen --vocab_from`), model and every hparam in `MUST_MATCH`. The
others (dropout, learning rate and schedule, batch size, label smoothing …) may differ; the
differences and the source checkpoint are written to `warm_start.json` in the new run.
A rerun of the same command resumes the new run's own checkpoints, never the source's.
"""

import json
import os

from t2t_lite.run_dir import checkpoints, model_info

RECORD_FILE = "warm_start.json"

# Hparams that change the weights' shapes or what the same weights compute, each with the raw
# fields it derives from; the others only change how the new run trains.
MUST_MATCH = {
    "hidden_size": ("hidden_size",),
    "filter_size": ("filter_size",),
    "num_heads": ("num_heads",),
    "encoder_layers": ("num_encoder_layers", "num_hidden_layers"),
    "decoder_layers": ("num_decoder_layers", "num_hidden_layers"),
    "key_channels": ("attention_key_channels", "hidden_size"),
    "value_channels": ("attention_value_channels", "hidden_size"),
    "pos": ("pos",),
    "relative_positions": ("self_attention_type", "max_relative_position"),  # k, or 0 for absolute positions
    "norm_position": ("norm_position",),
    "layer_norm_epsilon": ("layer_norm_epsilon",),
    "shared_embedding_and_softmax_weights": ("shared_embedding_and_softmax_weights",),
}
LEARNED_POSITIONS = {"max_length": ("max_length",)}  # sizes the learned position table (pos="emb")


class WarmStartError(checkpoints.CheckpointError):
    """The source checkpoint is missing, damaged or holds another model or vocabulary."""


def source_checkpoint(path: str) -> str:
    """The checkpoint prefix `--warm_start_from` names: a prefix, or a run directory's latest checkpoint."""
    try:
        return checkpoints.checkpoint_path(path, flag="--warm_start_from")
    except checkpoints.CheckpointError as error:
        raise WarmStartError(f"--warm_start_from: {error}") from None


def check_source(prefix: str, output_dir: str, hparams, model_name: str, vocab_size: int, vocabulary) -> dict:
    """Stops (WarmStartError) unless the source holds the model these settings build; returns what differs.

    Returns {hparam: [source value, new value]} for the hparams that may differ and do. The
    problem may differ (that is the point). Checked before any work: nothing is built or
    written when it stops.
    """
    source_dir = os.path.dirname(os.path.abspath(prefix))
    if source_dir == os.path.abspath(output_dir):
        raise WarmStartError(
            f"--warm_start_from={prefix} is in --output_dir={output_dir}; a warm start writes a new run and "
            f"never the source: give another --output_dir."
        )
    try:
        source = model_info.read_hparams(source_dir)
        model_info.check_trained_with(source_dir, None, model_name, vocab_size, vocabulary)
    except checkpoints.CheckpointError as error:
        raise WarmStartError(
            f"--warm_start_from: {error} Encode the new corpus with the source's vocabulary "
            f"(t2t-datagen --vocab_from) and use its --model."
        ) from None
    compared = dict(MUST_MATCH, **(LEARNED_POSITIONS if "emb" in (source.pos, hparams.pos) else {}))
    differing = [
        field
        for derived, fields in compared.items()
        if getattr(source, derived) != getattr(hparams, derived)
        for field in fields
        if getattr(source, field) != getattr(hparams, field)
    ]
    shapes = [f"{name} {getattr(source, name)!r} → {getattr(hparams, name)!r}" for name in dict.fromkeys(differing)]
    if shapes:
        raise WarmStartError(
            f"--warm_start_from={prefix}: its run ({os.path.join(source_dir, model_info.HPARAMS_FILE)}) built "
            f"another model ({'; '.join(shapes)}). Use the source's --hparams_set and change only training "
            f"hparams (dropout, learning rate, warm-up, batch size, label smoothing)."
        )
    new = hparams.values()
    return {name: [value, new[name]] for name, value in source.values().items() if new.get(name) != value}


def check_resumed(output_dir: str, prefix: str) -> None:
    """A rerun with --warm_start_from must resume the run that started from that checkpoint, no other."""
    record = read_record(output_dir)
    started_from = record.get("warm_start_from") if record else None
    if started_from != os.path.abspath(prefix):
        what = f"started from {started_from}" if started_from else "did not start from a warm start"
        raise WarmStartError(
            f"--output_dir={output_dir} already holds a run that {what}; it resumes only without "
            f"--warm_start_from={prefix} (or with that flag as it started). Give a new --output_dir to warm-start."
        )


def restore(model, prefix: str, model_name: str) -> int:
    """Sets `model`'s trainable weights (built) to the source's; returns the source's step.

    The source's model is rebuilt from its own hparams.json and restored whole, then its weights
    are copied in order: with another dropout rate the two models differ in their dropout
    seed-generator states (a rate of 0 has none), which the new run draws afresh from its seed.
    """
    source_hparams = model_info.read_hparams(os.path.dirname(prefix))
    source = model_info.build_model(source_hparams, model.vocab_size, model_name)
    try:
        checkpoints.restore_weights(source, prefix, flag="--warm_start_from")
    except checkpoints.CheckpointError as error:
        raise WarmStartError(f"--warm_start_from: {error}") from None
    for weight, trained in zip(model.trainable_variables, source.trainable_variables, strict=True):
        weight.assign(trained)
    return checkpoints.checkpoint_step(prefix)


def write_record(output_dir: str, prefix: str, differences: dict) -> None:
    """warm_start.json: the source checkpoint, its step and the hparams that differ from its run's."""
    record = {
        "warm_start_from": os.path.abspath(prefix),
        "source_step": checkpoints.checkpoint_step(prefix),
        "hparams_changed": differences,
    }
    model_info.atomic_write(os.path.join(output_dir, RECORD_FILE), json.dumps(record, indent=2, sort_keys=True))


def read_record(output_dir: str) -> dict:
    """The run's warm_start.json, or {} for a run that started from scratch; WarmStartError names a damaged one."""
    path = os.path.join(output_dir, RECORD_FILE)
    try:
        return model_info.json_object(path)
    except ValueError:
        raise WarmStartError(
            f"{path} cannot be read (not the JSON record t2t-trainer writes of the checkpoint this run started "
            f"from). Rerun without --warm_start_from to resume the run from its own checkpoints, or restore the file."
        ) from None
