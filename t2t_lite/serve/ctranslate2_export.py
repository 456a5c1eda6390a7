"""Export for CTranslate2: a trained Transformer (§3) as a CTranslate2 `TransformerSpec` model directory.

CTranslate2 is an inference engine for Transformer translation models on CPUs and GPUs
(int8, int16, float16, bfloat16 weights). `export_ctranslate2` restores a checkpoint (plain or
averaged) and maps every weight onto a `ctranslate2.specs.TransformerSpec`:

    t2t_lite                                      CTranslate2
    shared embedding E (×√d_model, §3.4)       -> encoder/decoder `embeddings` (row 0 zeroed, see below),
                                                  `scale_embeddings`; decoder `projection` = E, no bias
    sinusoids (§3.5) or learned positions      -> `position_encodings.encodings`: our table, rows of positions
    relative positions (Shaw et al., w^K, w^V) -> self-attention `relative_position_keys`, `_values` [2k + 1, d]
                                                  (`relative_position=True`, no position table)
    MultiHead W^Q, W^K, W^V, W^O (no biases)   -> self-attention `linear[0]` = [W^Q; W^K; W^V], `linear[1]` = W^O;
                                                  encoder-decoder `linear[0]` = W^Q, `linear[1]` = [W^K; W^V],
                                                  `linear[2]` = W^O (Keras kernels [in, out] transposed)
    FFN W_1, b_1, W_2, b_2 (eq. 2, ReLU)       -> `ffn.linear_0`, `ffn.linear_1`
    ResidualNorm's LayerNorm (post or pre)     -> each sub-layer's `layer_norm`, `pre_norm`; a pre-norm stack's
                                                  final LayerNorm -> the stack's `layer_norm`

and writes, in TF Serving's `<export_dir>/<step>/` layout as the SavedModel export does,
`model.bin`, `config.json` and `shared_vocabulary.json` (the SentencePiece pieces by id), the
SentencePiece model as `sentencepiece.model`, and `t2t_export.json` (what was exported and the
`translate_batch` options that decode as `t2t-decoder` does).

Where the two engines would differ by default, and how the export makes them agree:
  * Positions: CTranslate2's own sinusoids concatenate [sin | cos]; ours interleave them (§3.5 as
    printed). The spec gets our table (`positional.sinusoid_table`), long enough for CTranslate2's
    default limits (1024 input subwords; output length + `extra_length`), or the learned table as trained.
  * LayerNorm epsilon: CTranslate2 assumes 1e-5 when its config names none; ours is
    `hparams.layer_norm_epsilon` (1e-6), written into config.json.
  * The start symbol: our vocabulary has no `<s>`; the decoder starts from the padding id 0
    (`beam_search.START_ID`), so `decoder_start_token` (and `bos_token`, which CTranslate2 requires to
    name a token) is the piece of id 0. Sources get EOS appended by CTranslate2 (`add_source_eos`), as
    our inputs end in EOS.
  * Id 0's embedding: ours is the zero vector wherever id 0 appears (the start, and any later step
    that emitted or is given id 0), CTranslate2 looks up its row. The embedding rows of id 0 are stored
    as zeros; the pre-softmax projection keeps E's row 0 (the logit of id 0), so it is stored as its
    own matrix rather than an alias of the embeddings (one more [vocab, d_model] matrix in model.bin).
  * Key width ≠ value width (`attention_key_channels`, `attention_value_channels`): CTranslate2 splits
    its fused projections into heads of one width, so the narrower of d_k, d_v is padded with zero
    columns per head (zeros add nothing to Q·Kᵀ nor to the output), and `queries_scale` keeps
    1/√d_k of eq. 1.
  * Alignments: the decoder spec's `alignment_layer` and `alignment_heads` are the export's (`--decode_hparams`,
    default the last layer and all heads), so `translate_batch(..., return_attention=True)` returns the
    attention that `t2t-decoder`'s write_alignment merges into word links; `alignment.word_links` merges it.
  * Decoding options, not stored in a model: CTranslate2's `min_decoding_length` defaults to 1 (ours
    lets EOS come first: pass 0), `max_decoding_length` to 256 (ours: input length + `extra_length`), its
    `max_input_length` (1024) cuts inputs as our export does (first subwords, then EOS). Its length
    penalty is `score / length^α`, not GNMT's `((5 + |Y|) / 6)^α`, with another stopping rule: beam
    search differs by design; greedy decoding and teacher-forced scores do not
    (`tests/test_ctranslate2_export.py`, figures in docs/results.md). An empty source gets an empty
    translation without running the model.

`--ct2_quantization` stores int8, int8_float32, int16, float16 or bfloat16 weights (CTranslate2's own
quantization; bfloat16 rounded in numpy, `ctranslate2_bfloat16.py`); a Translator may still pick
another `compute_type` when loading. The model is written to a hidden staging directory and renamed
into place, so nothing half-written is ever seen.
`ctranslate2` is an optional extra (`pip install "t2t_lite[ctranslate2]"`).
"""

import dataclasses
import importlib.util
import json
import os
import shutil

import numpy as np
import sentencepiece

from t2t_lite import registry
from t2t_lite.data import whole_files
from t2t_lite.data.vocabulary import EOS_ID, PAD_ID, UNK_ID
from t2t_lite.hparam import HParams
from t2t_lite.model.positional import sinusoid_table
from t2t_lite.model.transformer import DEFAULT_LEARNED_POSITIONS, Transformer
from t2t_lite.run_dir import checkpoints
from t2t_lite.serve import ctranslate2_bfloat16
from t2t_lite.serve.ctranslate2_layers import head_widths, numpy_weight, set_attention, set_feed_forward, set_layer_norm
from t2t_lite.serve.export import (
    EXPORT_CONFIG_FILE,
    ExportError,
    check_learned_positions,
    restore_for_export,
    sentencepiece_vocabulary,
)
from t2t_lite.serve.export_settings import export_settings

QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "bfloat16")
SENTENCEPIECE_FILE = "sentencepiece.model"
INSTALL_HINT = 'pip install "t2t_lite[ctranslate2]" (or pip install ctranslate2==4.8.5)'

# HParams fields the converter maps, or that do not change what a trained model computes when
# decoding. A field missing here (one added later) is converted only at its default value, and
# refused by name otherwise, so a new architectural setting is never silently dropped.
MAPPED_HPARAMS = {
    "hidden_size",
    "filter_size",
    "num_heads",
    "num_hidden_layers",
    "num_encoder_layers",
    "num_decoder_layers",
    "attention_key_channels",
    "attention_value_channels",
    "pos",
    "self_attention_type",
    "max_relative_position",
    "norm_position",
    "layer_norm_epsilon",
    "shared_embedding_and_softmax_weights",
    "max_length",
    "extra_length",
    # CTranslate2's compute_type chooses the precision when a Translator loads the model.
    "activation_dtype",
}
TRAINING_ONLY_HPARAMS = {
    "layer_prepostprocess_dropout",
    "attention_dropout",
    "relu_dropout",
    "symbol_dropout",
    "label_smoothing",
    "learning_rate",
    "learning_rate_warmup_steps",
    "learning_rate_decay_steps",
    "optimizer_adam_beta1",
    "optimizer_adam_beta2",
    "optimizer_adam_epsilon",
    "clip_grad_norm",
    "batch_size",
    "tokens_per_step",
    "min_length_bucket",
    "length_bucket_step",
    "xla_compile",
    "beam_size",
    "alpha",
}


def check_installed() -> None:
    """Stops with how to install ctranslate2 when it is missing (call before any work)."""
    if importlib.util.find_spec("ctranslate2") is None:
        raise ExportError(f"--export_format=ctranslate2 needs the ctranslate2 package: {INSTALL_HINT}.")


def check_quantization(quantization: str) -> None:
    if quantization and quantization not in QUANTIZATIONS:
        raise ExportError(
            f"--ct2_quantization={quantization}: not one of CTranslate2's {', '.join(QUANTIZATIONS)} "
            f"(or empty for the float32 weights as trained)."
        )


def check_representable(hparams, model_name: str) -> None:
    """Stops on a model the converter cannot map exactly, naming the setting."""
    if registry.model(model_name) is not Transformer:
        raise ExportError(
            f"--model={model_name}: only t2t_lite's 'transformer' maps onto CTranslate2's TransformerSpec."
        )
    if hparams.relative_positions and hparams.pos != "none":
        raise ExportError(
            f"hparam pos={hparams.pos!r} with self_attention_type=dot_product_relative: CTranslate2's relative "
            f"position spec has no absolute position table, so only pos='none' (transformer_relative's) converts."
        )
    for field in dataclasses.fields(hparams):
        if field.name in MAPPED_HPARAMS or field.name in TRAINING_ONLY_HPARAMS:
            continue
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        if getattr(hparams, field.name) != default:
            raise ExportError(
                f"hparam {field.name}={getattr(hparams, field.name)!r}: the CTranslate2 export does not map this "
                f"setting (only its default, {default!r}), so the converted model would compute something else."
            )


# -- The spec -------------------------------------------------------------------------------
def position_table(model, hparams, settings) -> np.ndarray:
    """The positions' table: learned as trained, or our sinusoids (zeros for pos=none) for the longest input and
    output."""
    if hparams.pos == "emb":
        return numpy_weight(model.source_position.table)
    rows = max(DEFAULT_LEARNED_POSITIONS, settings.max_input_length) + settings.search.extra_length
    if hparams.pos == "none":  # no positions at all: CTranslate2 adds a table, so it adds zeros
        return np.zeros((rows, hparams.hidden_size), np.float32)
    return np.asarray(sinusoid_table(np.arange(rows), hparams.hidden_size), np.float32)


def without_padding_row(embeddings: np.ndarray) -> np.ndarray:
    """E with row 0 zeroed: id 0 (padding, the start symbol) embeds to zero, as `SharedEmbedding` does."""
    embeddings = embeddings.copy()
    embeddings[PAD_ID] = 0.0
    return embeddings


def alignment_spec(hparams, alignment) -> dict:
    """The decoder's alignment_layer and alignment_heads: `translate_batch(return_attention=True)` then returns
    the attention that t2t-decoder's write_alignment reads (t2t_lite/decode/alignment.py), heads averaged."""
    heads = alignment.alignment_heads or hparams.num_heads  # CTranslate2 averages the first N heads
    return {"alignment_layer": alignment.alignment_layer % hparams.decoder_layers, "alignment_heads": heads}


def transformer_spec(model, hparams, pieces: list, settings):
    """The CTranslate2 TransformerSpec of a restored `Transformer`, with config and vocabulary registered."""
    from ctranslate2.specs import common_spec, transformer_spec

    key_depth, value_depth, width = head_widths(hparams)
    common = dict(
        pre_norm=hparams.norm_position == "pre",
        activation=common_spec.Activation.RELU,
        head_dim=width if width * hparams.num_heads != hparams.hidden_size else None,
        relative_position=bool(hparams.relative_positions),
    )
    spec = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(hparams.encoder_layers, hparams.num_heads, **common),
        transformer_spec.TransformerDecoderSpec(
            hparams.decoder_layers, hparams.num_heads, **common, **alignment_spec(hparams, settings.alignment)
        ),
    )
    encoder, decoder = spec.encoder, spec.decoder
    source_embeddings = without_padding_row(numpy_weight(model.source_embedding.embeddings))
    target_embeddings = (
        source_embeddings
        if model.target_embedding is model.source_embedding
        else without_padding_row(numpy_weight(model.target_embedding.embeddings))
    )
    encoder.embeddings[0].weight = source_embeddings
    decoder.embeddings.weight = target_embeddings
    decoder.projection.weight = numpy_weight(model.softmax_weights.embeddings)
    encoder.scale_embeddings = decoder.scale_embeddings = True
    if not hparams.relative_positions:
        encoder.position_encodings.encodings = position_table(model, hparams, settings)
        decoder.position_encodings.encodings = (
            numpy_weight(model.target_position.table) if hparams.pos == "emb" else encoder.position_encodings.encodings
        )
    for layer_spec, layer in zip(encoder.layer, model.encoder.stack):
        set_attention(layer_spec.self_attention, layer.self_attention, hparams, self_attention=True)
        set_layer_norm(layer_spec.self_attention.layer_norm, layer.attention_residual.norm)
        set_feed_forward(layer_spec.ffn, layer.feed_forward)
        set_layer_norm(layer_spec.ffn.layer_norm, layer.feed_forward_residual.norm)
    for layer_spec, layer in zip(decoder.layer, model.decoder.stack):
        set_attention(layer_spec.self_attention, layer.self_attention, hparams, self_attention=True)
        set_layer_norm(layer_spec.self_attention.layer_norm, layer.self_attention_residual.norm)
        set_attention(layer_spec.attention, layer.memory_attention, hparams, self_attention=False)
        set_layer_norm(layer_spec.attention.layer_norm, layer.memory_attention_residual.norm)
        set_feed_forward(layer_spec.ffn, layer.feed_forward)
        set_layer_norm(layer_spec.ffn.layer_norm, layer.feed_forward_residual.norm)
    if hparams.norm_position == "pre":
        set_layer_norm(encoder.layer_norm, model.encoder.norm)
        set_layer_norm(decoder.layer_norm, model.decoder.norm)
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    spec.config.unk_token = pieces[UNK_ID]
    spec.config.eos_token = pieces[EOS_ID]
    spec.config.bos_token = spec.config.decoder_start_token = pieces[PAD_ID]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True
    spec.config.layer_norm_epsilon = float(hparams.layer_norm_epsilon)
    return spec


def sentencepiece_pieces(vocabulary) -> list:
    processor = sentencepiece.SentencePieceProcessor(model_proto=vocabulary.model_proto)
    return [processor.id_to_piece(index) for index in range(processor.get_piece_size())]


# -- Writing ----------------------------------------------------------------------------------
def translate_options(settings) -> dict:
    """`Translator.translate_batch` options that decode as `t2t-decoder` with these settings."""
    return {
        "beam_size": settings.search.beam_size,
        "length_penalty": settings.search.alpha,  # CTranslate2's score / length^α, not GNMT's lp(Y)
        "max_input_length": settings.max_input_length,
        "max_decoding_length": f"longest input in subwords + 1 (EOS) + {settings.search.extra_length}",
        "min_decoding_length": 0,
    }


def export_config(problem, hparams, settings, checkpoint: str, quantization: str) -> dict:
    """The contents of t2t_export.json: what was exported, and how to decode it as t2t-decoder does."""
    return {
        "format": "ctranslate2",
        "problem": problem.name,
        "checkpoint": os.path.abspath(checkpoint),
        "step": checkpoints.checkpoint_step(checkpoint),
        "vocabulary": SENTENCEPIECE_FILE,
        "quantization": quantization or "float32",
        "hparams": json.loads(hparams.to_json()),
        "translate_options": translate_options(settings),
        # What return_attention=True returns: this decoder layer's encoder-decoder attention, these heads averaged.
        "alignment": {
            "layer": settings.alignment.alignment_layer,
            "heads": settings.alignment.alignment_heads or "all",
        },
    }


def write_model(spec, quantization: str, vocabulary_path: str, config: dict, final_dir: str) -> None:
    """Saves the spec, the SentencePiece model and t2t_export.json through a staging directory renamed at the end."""
    staging = os.path.join(os.path.dirname(final_dir), f".{os.path.basename(final_dir)}.incomplete-{os.getpid()}")
    try:
        os.makedirs(staging)
        spec.validate()
        if quantization == "bfloat16":
            ctranslate2_bfloat16.with_bfloat16_weights(spec)
        spec.optimize(quantization=quantization or None)
        with whole_files.naming(final_dir):
            spec.save(staging)
            shutil.copyfile(vocabulary_path, os.path.join(staging, SENTENCEPIECE_FILE))
            with open(os.path.join(staging, EXPORT_CONFIG_FILE), "w") as file:
                json.dump(config, file, indent=2, sort_keys=True)
        os.rename(staging, final_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def export_ctranslate2(
    problem,
    hparams: HParams,
    data_dir: str,
    checkpoint_path_or_dir: str,
    export_dir: str,
    quantization: str = "",
    decode_overrides: str = "",
    model_name: str = "transformer",
) -> str:
    """Writes `<export_dir>/<checkpoint step>/` (a CTranslate2 model + SentencePiece model) and returns that path."""
    check_installed()
    check_quantization(quantization)
    check_representable(hparams, model_name)
    vocabulary = sentencepiece_vocabulary(
        problem, data_dir, "a CTranslate2 model is served with the SentencePiece model beside it"
    )
    settings = export_settings(hparams, problem, decode_overrides)
    if settings.search.xla or settings.quantize:
        raise ExportError(
            "--decode_hparams: xla and quantize belong to the SavedModel export; for CTranslate2 give "
            "--ct2_quantization, and the compute_type when loading."
        )
    check_learned_positions(hparams, settings)
    checkpoint, final_dir, model = restore_for_export(
        problem, hparams, vocabulary, checkpoint_path_or_dir, export_dir, model_name
    )
    spec = transformer_spec(model, hparams, sentencepiece_pieces(vocabulary), settings)
    config = export_config(problem, hparams, settings, checkpoint, quantization)
    write_model(spec, quantization, vocabulary.model_path, config, final_dir)
    print(
        f"Exported {checkpoint} to {final_dir} (CTranslate2, {quantization or 'float32'} weights; "
        f"translate_batch options in {EXPORT_CONFIG_FILE})"
    )
    return final_dir
