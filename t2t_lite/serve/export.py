"""Export for serving: a SavedModel that takes raw text and returns translations (§6.1 decoding).

tensor2tensor exported a graph that took serialized `tf.Example`s of token ids, so a
client had to tokenize exactly as the trainer did. `export_model` instead writes a
SavedModel whose graph holds the whole of `t2t-decoder`'s path:

    text -> whitespace normalization -> SentencePiece ids (+ EOS) -> beam search with the
    key/value cache (`t2t_lite.decode.beam_search.decode`) -> best hypothesis -> SentencePiece text

Signatures (what `saved_model_cli show --all` lists and TF Serving serves), in
`t2t_lite.serve.serving_signatures`: `serving_default` (string [batch] in, translations,
scores, input_truncated and input_not_utf8 out), `translate_ids` (int32 [batch, length] of
subword ids), `score`, `translate_prefix` and `sample`; `export_config` lists each one's
inputs and outputs. An input of another rank is refused with InvalidArgumentError.

`--decode_hparams=xla=true` compiles the beam search with XLA (`beam_search.decode` with
static shapes, as `t2t-decoder --decode_hparams=xla=true`): inputs are padded to the
length and batch buckets of `t2t_lite.serve.xla_buckets`, with the same translations. TF
Serving then needs `--xla_cpu_compilation_enabled=true` (without it, it refuses the
compiled functions); the plain export, the default, needs no flag. Every export writes
`assets.extra/tf_serving_warmup_requests` (`t2t_lite.serve.serving_warmup`): requests of each bucket
shape, for both signatures, which TF Serving replays when it loads the version.

Inputs longer than `max_input_length - 1` subwords are cut to their first
`max_input_length - 1` subwords before EOS is appended (the model sees at most
`max_input_length` ids), and `input_truncated` is true for them, so a client can tell;
each sentence emits at most its input length + `extra_length` subwords. The decode settings are fixed at
export and recorded, with the problem and the hparams, in `assets/t2t_export.json` (in Python:
`tf.saved_model.load(path).export_config.asset_path`); the vocabulary's `.model` file
is copied to `assets/` too. The graph needs only TensorFlow and the tensorflow-text
ops (SentencePiece), both in the stock `tensorflow/serving` image: no Python code of
this project runs at load time, and the only variables are the model's weights,
restored from the checkpoint.

`<export_dir>/<version>/` is the layout TF Serving watches; the version is the
checkpoint's step. The SavedModel is written to a hidden staging directory
(`.<version>.incomplete-<pid>`) and renamed into place, so a server never sees half an
export; an export that fails (a full disk) removes it, and the next export into the same
--export_dir removes, saying so, one that a killed export left.
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np
import tensorflow as tf

from t2t_lite.data import whole_files
from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.decode import quantization, search_settings
from t2t_lite.hparam import flat_values
from t2t_lite.model.transformer import DEFAULT_LEARNED_POSITIONS
from t2t_lite.run_dir import checkpoints, model_info, partial_writes
from t2t_lite.serve import serving_warmup, xla_buckets
from t2t_lite.serve.export_settings import ExportSettings, export_settings
from t2t_lite.serve.serving_signatures import serving_module

EXPORT_CONFIG_FILE = "t2t_export.json"
TEXT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "translate_ids"
SCORE_SIGNATURE = "score"
PREFIX_SIGNATURE = "translate_prefix"
SAMPLE_SIGNATURE = "sample"
ALIGNMENTS_OUTPUT = "string [batch]: Pharaoh links source word-target word, as t2t-decoder writes after ' ||| '"


class ExportError(RuntimeError):
    """The export cannot be written (version exists, vocabulary unsuited); says what to do."""


# -- Warm-up ------------------------------------------------------------------------------
def warmup_shapes(settings: ExportSettings) -> list:
    """(batch, length) of the warm-up requests: every bucket the XLA export compiles; for the plain
    export, whose graph takes any shape, each batch bucket at the first length bucket."""
    if settings.search.xla:
        return xla_buckets.bucket_shapes(settings.max_input_length, settings.max_batch_size)
    first_length = xla_buckets.length_buckets(settings.max_input_length)[0]
    return [(batch, first_length) for batch in xla_buckets.batch_buckets(settings.max_batch_size)]


def warmup_requests(vocabulary, settings: ExportSettings) -> list:
    """[(signature, inputs)] for both signatures at each warm-up shape: `batch` copies of a sentence
    whose ids (EOS included) fill the bucket's length, or the longest input when that is shorter."""
    requests = []
    for batch, length in warmup_shapes(settings):
        text = text_of_length(vocabulary, min(length, settings.max_input_length) - 1)
        ids = vocabulary.encode(text) + [EOS_ID]
        requests.append((TEXT_SIGNATURE, {"inputs": np.array([text.encode("utf-8")] * batch, object)}))
        requests.append((IDS_SIGNATURE, {"inputs": np.array([ids] * batch, np.int32)}))
    return requests


def text_of_length(vocabulary, count: int) -> str:
    """A text the vocabulary encodes to exactly `count` ids: one piece repeated."""
    for piece in range(EOS_ID + 1, vocabulary.vocab_size):
        text = vocabulary.decode([piece] * count)
        if len(vocabulary.encode(text)) == count:
            return text
    raise ExportError(
        f"no piece of {vocabulary.model_path} repeated {count} times encodes to {count} ids; the "
        f"warm-up requests need one."
    )


# -- Writing ------------------------------------------------------------------------------
def export_config(problem, hparams, settings: ExportSettings, checkpoint: str, vocabulary_file: str) -> dict:
    """The contents of assets/t2t_export.json: what was exported, and how it decodes."""
    config = _export_config(problem, hparams, settings, checkpoint, vocabulary_file)
    if settings.alignment.write_alignment:  # the text signatures' word links (t2t_lite/decode/alignment.py)
        for name in (TEXT_SIGNATURE, PREFIX_SIGNATURE, SAMPLE_SIGNATURE, SCORE_SIGNATURE):
            config["signatures"][name]["alignments"] = ALIGNMENTS_OUTPUT
    return config


def _export_config(problem, hparams, settings: ExportSettings, checkpoint: str, vocabulary_file: str) -> dict:
    return {
        "problem": problem.name,
        "checkpoint": os.path.abspath(checkpoint),
        "step": checkpoints.checkpoint_step(checkpoint),
        "vocabulary": vocabulary_file,
        "decode_hparams": flat_values(settings),  # by the names --decode_hparams takes
        "hparams": json.loads(hparams.to_json()),
        "signatures": {
            TEXT_SIGNATURE: {
                "inputs": "string [batch]",
                "outputs": "string [batch]",
                "scores": "float32 [batch]",
                "input_truncated": "bool [batch]",
                "input_not_utf8": "bool [batch]",
            },
            IDS_SIGNATURE: {
                "inputs": "int32 [batch, length]",
                "outputs": "int32 [batch, length]",
                "scores": "float32 [batch]",
                "input_truncated": "bool [batch]",
            },
            PREFIX_SIGNATURE: {
                "inputs": "string [batch]",
                "prefixes": "string [batch]: the start of each translation ('' for none)",
                "outputs": "string [batch]: the whole translation, prefix included",
                "scores": "float32 [batch]",
                "input_truncated": "bool [batch]",
                "input_not_utf8": "bool [batch]",
            },
            SAMPLE_SIGNATURE: {
                "inputs": "string [batch]",
                "outputs": "string [batch]: one translation drawn with the sampling_* settings",
                "scores": "float32 [batch]: its log-probability under the model, over the length penalty",
                "input_truncated": "bool [batch]",
                "input_not_utf8": "bool [batch]",
            },
            SCORE_SIGNATURE: {
                "inputs": "string [batch]",
                "targets": "string [batch]",
                "scores": "float32 [batch]: log P(target | source), natural log, EOS included",
                "token_scores": "float32 [batch, length]: each target subword's term, EOS last, 0 after",
                "target_lengths": "int32 [batch]: subwords and EOS of each target",
                "input_truncated": "bool [batch]",
                "input_not_utf8": "bool [batch]",
            },
        },
        # The static shapes the XLA search is compiled for (inputs padded up to them), or null.
        "xla_buckets": {
            "length": list(xla_buckets.length_buckets(settings.max_input_length)),
            "batch": list(xla_buckets.batch_buckets(settings.max_batch_size)),
        }
        if settings.search.xla
        else None,
        "warmup_requests": {
            "file": serving_warmup.WARMUP_FILE,
            "signatures": [TEXT_SIGNATURE, IDS_SIGNATURE],
            "shapes": [list(shape) for shape in warmup_shapes(settings)],
        },
    }


def version_dir(export_dir: str, checkpoint: str) -> str:
    """`<export_dir>/<step>`; an existing version is never overwritten."""
    path = os.path.join(export_dir, str(checkpoints.checkpoint_step(checkpoint)))
    if os.path.exists(path):
        raise ExportError(
            f"{path} already exists: version {os.path.basename(path)} (the step of {checkpoint}) was exported "
            f"before and is never overwritten, since a server may be serving it. Export a later checkpoint "
            f"(--checkpoint_path), choose another --export_dir, or delete {path} yourself."
        )
    return path


def write_saved_model(module: tf.Module, config: dict, vocabulary_path: str, requests: list, final_dir: str) -> None:
    """Saves `module` with both signatures, its assets and the warm-up `requests`, through a staging
    directory renamed at the end.

    TF Serving loads only directories named by a number, so it ignores the hidden staging one,
    and a failed export leaves nothing behind.
    """
    staging = os.path.join(os.path.dirname(final_dir), f".{os.path.basename(final_dir)}.incomplete-{os.getpid()}")
    try:
        with tempfile.TemporaryDirectory() as config_dir:
            config_path = os.path.join(config_dir, EXPORT_CONFIG_FILE)
            with whole_files.naming(config_path), open(config_path, "w") as file:
                json.dump(config, file, indent=2, sort_keys=True)
            module.export_config = tf.saved_model.Asset(config_path)
            module.vocabulary_file = tf.saved_model.Asset(vocabulary_path)
            with whole_files.naming(final_dir):
                tf.saved_model.save(
                    module,
                    staging,
                    signatures={
                        TEXT_SIGNATURE: module.translate,
                        IDS_SIGNATURE: module.translate_ids,
                        SCORE_SIGNATURE: module.score,
                        PREFIX_SIGNATURE: module.translate_prefix,
                        SAMPLE_SIGNATURE: module.sample,
                    },
                )
        with whole_files.naming(final_dir):
            serving_warmup.write_warmup_requests(staging, requests)
        os.rename(staging, final_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def sentencepiece_vocabulary(problem, data_dir: str, why: str):
    """The problem's vocabulary, which an export needs to be a SentencePiece model (`why` says what for)."""
    vocabulary = problem.vocabulary(data_dir)
    if getattr(vocabulary, "model_path", None) is None:
        raise ExportError(
            f"--problem={problem.name}: its vocabulary is not a SentencePiece model; {why}, "
            f"so only text problems can be exported."
        )
    return vocabulary


def check_learned_positions(hparams, settings: ExportSettings) -> None:
    """A learned position table (pos=emb) ends where it ends: inputs cut to max_input_length must fit it."""
    if hparams.pos == "emb" and settings.max_input_length > (hparams.max_length or DEFAULT_LEARNED_POSITIONS):
        raise ExportError(
            f"--decode_hparams max_input_length={settings.max_input_length} exceeds the learned "
            f"position table (hparams max_length={hparams.max_length}); lower it."
        )


def restore_for_export(problem, hparams, vocabulary, checkpoint_path_or_dir: str, export_dir: str, model_name: str):
    """(checkpoint path, the version directory to write, the restored model), the directory checked first and
    the staging directories of exports killed there removed (`partial_writes.clean_export_dir`)."""
    partial_writes.clean_export_dir(export_dir, "t2t-exporter", log=_stderr)
    checkpoint = checkpoints.checkpoint_path(checkpoint_path_or_dir)
    final_dir = version_dir(export_dir, checkpoint)
    model = model_info.restore_model(
        checkpoint, hparams, vocabulary.vocab_size, model_name, problem.name, vocabulary.fingerprint
    )
    return checkpoint, final_dir, model


def export_model(
    problem,
    hparams,
    data_dir: str,
    checkpoint_path_or_dir: str,
    export_dir: str,
    decode_overrides: str = "",
    model_name: str = "transformer",
) -> str:
    """Writes `<export_dir>/<checkpoint step>/` (SavedModel + assets) and returns that path."""
    vocabulary = sentencepiece_vocabulary(problem, data_dir, "the export tokenizes in-graph with SentencePiece")
    settings = export_settings(hparams, problem, decode_overrides)
    check_learned_positions(hparams, settings)
    search_settings.check_vocabulary(settings.search, vocabulary.vocab_size)  # the `sample` signature's top-k
    note = quantization.speed_note(settings.quantize, settings.search.xla)
    if note:  # of this CPU: the one the export is made on, often the one it serves on
        print(note, file=sys.stderr)
    checkpoint, final_dir, model = restore_for_export(
        problem, hparams, vocabulary, checkpoint_path_or_dir, export_dir, model_name
    )
    module = serving_module(quantization.quantize_for_decoding(model, settings.quantize), vocabulary, settings)
    config = export_config(problem, hparams, settings, checkpoint, os.path.basename(vocabulary.model_path))
    requests = warmup_requests(vocabulary, settings)
    write_saved_model(module, config, vocabulary.model_path, requests, final_dir)
    compiled = f", XLA over {len(warmup_shapes(settings))} bucket shapes" if settings.search.xla else ""
    compiled += f", {settings.quantize} products" if settings.quantize else ""
    print(
        f"Exported {checkpoint} to {final_dir} (beam {settings.search.beam_size}, α {settings.search.alpha}, "
        f"+{settings.search.extra_length}, inputs ≤ {settings.max_input_length} ids{compiled}; "
        f"{len(requests)} warm-up requests)"
    )
    return final_dir
