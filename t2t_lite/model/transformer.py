"""The Transformer (§3, Figure 1): encoder and decoder stacks over shared embeddings.

    encoder: x = Dropout(embed(inputs) + PE) -> N × EncoderLayer
    decoder: y = Dropout(embed(shift_right(targets)) + PE) -> N × DecoderLayer(y, encoder output)
    logits  = y Eᵀ            (E shared with both embeddings, §3.4)

With hparams.symbol_dropout > 0 (tensor2tensor's word dropout, not the paper), training first
replaces ids of `inputs` and of `shift_right(targets)` by padding; the loss still sees every target.

`Transformer(hparams, vocab_size)` is a `keras.Model` registered as "transformer".
Training calls it on `{"inputs", "targets"}`; decoding uses `encode`,
`initial_cache` and `decode_step`, one position at a time with a key/value cache.
"""

import keras
from keras import ops

from t2t_lite.model.attention import MASKED, causal_bias, padding_bias
from t2t_lite.model.decoder import Decoder
from t2t_lite.model.dropout import Dropout, SymbolDropout
from t2t_lite.model.embedding import SharedEmbedding
from t2t_lite.model.encoder import Encoder
from t2t_lite.model.positional import PositionEncoding
from t2t_lite.registry import register_model

# hparams.activation_dtype -> Keras dtype policy: variables stay float32, compute runs in the
# lower precision, and the logits are cast back to float32 (see `logits`).
DTYPE_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}

# Size of the learned position table (pos="emb"), used when hparams.max_length is 0 (no limit).
DEFAULT_LEARNED_POSITIONS = 1024


def shift_right(targets):
    """Decoder inputs: the targets one step later, with the start symbol 0 in front (§3.1)."""
    return ops.pad(targets, ((0, 0), (1, 0)))[:, :-1]


@register_model("transformer")
class Transformer(keras.Model):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    Args:
        hparams: `HParams` (architecture, dropout, `activation_dtype`).
        vocab_size: number of subword ids; 0 is padding and 1 is EOS.

    Call arguments:
        features: {"inputs": int32 [batch, src_len], "targets": int32 [batch, tgt_len]}, 0-padded.
        training: enables dropout.
        return_attention: also return {"encoder_self", "decoder_self", "encoder_decoder"}, each a
            list per layer of [batch, heads, query_len, key_len] attention weights.

    Returns float32 logits [batch, tgt_len, vocab_size], where position j predicts targets[:, j]
    from targets[:, :j] and the inputs.

    Example:
        model = Transformer(registry.hparams("transformer_tiny"), vocab_size=100)
        logits = model({"inputs": [[5, 6, 1]], "targets": [[7, 1]]})     # [1, 2, 100]
    """

    def __init__(self, hparams, vocab_size, **kwargs):
        super().__init__(dtype=DTYPE_POLICIES[hparams.activation_dtype], **kwargs)
        self.hparams = hparams
        self.vocab_size = vocab_size
        dtype = self.dtype_policy
        self.target_embedding = SharedEmbedding(
            vocab_size,
            hparams.hidden_size,
            name="shared_embedding" if hparams.shared_embedding_and_softmax_weights else "target_embedding",
            dtype=dtype,
        )
        if hparams.shared_embedding_and_softmax_weights:
            self.source_embedding = self.softmax_weights = self.target_embedding
        else:
            self.source_embedding = SharedEmbedding(
                vocab_size, hparams.hidden_size, name="source_embedding", dtype=dtype
            )
            self.softmax_weights = SharedEmbedding(vocab_size, hparams.hidden_size, name="softmax", dtype=dtype)
        positions = (hparams.max_length or DEFAULT_LEARNED_POSITIONS) + hparams.extra_length
        self.source_position = PositionEncoding(
            hparams.hidden_size, hparams.pos, positions, name="source_position", dtype=dtype
        )
        self.target_position = PositionEncoding(
            hparams.hidden_size, hparams.pos, positions, name="target_position", dtype=dtype
        )
        self.embedding_dropout = Dropout(hparams.layer_prepostprocess_dropout, dtype=dtype)
        if hparams.symbol_dropout:  # only then: a seed generator is a variable, and checkpoints keep their layout
            self.symbol_dropout = SymbolDropout(hparams.symbol_dropout, name="symbol_dropout")
        self.encoder = Encoder(hparams, name="encoder", dtype=dtype)
        self.decoder = Decoder(hparams, name="decoder", dtype=dtype)
        self.build()

    def build(self, input_shape=None):
        """Creates every variable up front, so checkpoints restore into a fresh model."""
        hidden_shape = (None, None, self.hparams.hidden_size)
        for layer in {
            id(layer): layer for layer in (self.source_embedding, self.target_embedding, self.softmax_weights)
        }.values():
            layer.build()
        self.source_position.build()
        self.target_position.build()
        self.encoder.build(hidden_shape)
        self.decoder.build(hidden_shape, hidden_shape)
        self.built = True

    # -- Encoder ------------------------------------------------------------------------
    def encode(self, inputs, training=False):
        """inputs int32 [batch, src_len] -> (encoder output [batch, src_len, d_model], mask bool [batch, src_len])."""
        output, mask, _ = self._encode(inputs, training=training, return_weights=False)
        return output, mask

    def _encode(self, inputs, training, return_weights):
        inputs = self._drop_symbols(ops.convert_to_tensor(inputs, dtype="int32"), training)
        mask = ops.not_equal(inputs, 0)
        x = self.source_position(self.source_embedding(inputs))
        x = self.embedding_dropout(x, training=training)
        output, weights = self.encoder(x, bias=padding_bias(mask), return_weights=return_weights, training=training)
        return output, mask, weights

    # -- Teacher-forced decoder (training and scoring) -----------------------------------
    def call(self, features, training=False, return_attention=False):
        hidden, attention = self.decoder_hidden(features, training=training, return_attention=return_attention)
        logits = self.logits(hidden)
        return (logits, attention) if return_attention else logits

    def decoder_hidden(self, features, training=False, return_attention=False):
        """The decoder's output before the pre-softmax projection, [batch, tgt_len, d_model].

        Separate from `logits` so a loss can project only the positions it needs.
        """
        encoder_output, mask, encoder_weights = self._encode(
            features["inputs"], training=training, return_weights=return_attention
        )
        targets = ops.convert_to_tensor(features["targets"], dtype="int32")
        y = self.target_position(self.target_embedding(self._drop_symbols(shift_right(targets), training)))
        y = self.embedding_dropout(y, training=training)
        hidden, decoder_weights, _ = self.decoder(
            y,
            encoder_output,
            self_bias=causal_bias(ops.shape(targets)[1]),
            memory_bias=padding_bias(mask),
            return_weights=return_attention,
            training=training,
        )
        attention = {"encoder_self": encoder_weights, **decoder_weights} if return_attention else None
        return hidden, attention

    def _drop_symbols(self, ids, training):
        """hparams.symbol_dropout while training (the module docstring); the ids unchanged otherwise."""
        return self.symbol_dropout(ids, training=training) if self.hparams.symbol_dropout else ids

    def logits(self, hidden):
        """Pre-softmax projection with the (shared) embedding matrix, in float32."""
        return ops.cast(self.softmax_weights.logits(hidden), "float32")

    # -- Incremental decoding -----------------------------------------------------------
    def initial_cache(self, encoder_output, inputs_mask, max_length=0, beam_slots=0):
        """The decoding state for a batch of encoded sentences; every leaf is batch-major.

        The self-attention keys/values grow by one position per step, or with `max_length`
        > 0 are preallocated for that many steps (static shapes, for XLA; see `decode_step`).
        `beam_slots` > 0 (with `max_length`) gives each sentence that many beam slots that
        beam search never reorders, and adds "slots" [batch, max_length]: which slot holds
        each position of a hypothesis' past (beam search repeats and reorders it instead).
        """
        cache = {
            "layers": self.decoder.initial_cache(encoder_output, max_length, beam_slots),
            "memory_bias": padding_bias(inputs_mask),
        }
        if beam_slots:
            cache["slots"] = ops.zeros((ops.shape(encoder_output)[0], max_length), dtype="int32")
        return cache

    def decode_step(self, ids, step, cache, training=False, in_place=False):
        """One decoder position: ids int32 [batch] at position `step` -> (logits [batch, vocab], new cache).

        `in_place=True` is for a cache from `initial_cache(..., max_length)`: the step's keys and
        values are written at `step` and the later, still empty, positions are masked out.
        With beam slots, hypothesis b of a sentence writes its keys/values into slot b, marks
        position `step` of its "slots" row as b, and attends to position t in the slot that its
        row names for t: after beam search reorders the rows, a hypothesis finds its parent's
        past where the parent wrote it, so no key or value is ever copied between beams.
        """
        ids = ops.expand_dims(ops.convert_to_tensor(ids, dtype="int32"), 1)
        y = self.target_position(self.target_embedding(ids), start=step)
        y = self.embedding_dropout(y, training=training)
        new_cache = {"memory_bias": cache["memory_bias"]}
        self_bias = None
        if "slots" in cache:
            if not in_place:
                raise ValueError("A cache with beam slots is preallocated: call decode_step(..., in_place=True).")
            new_cache["slots"] = self._mark_own_slot(cache, step)
            self_bias = self._slot_positions_bias(new_cache["slots"], self._beam_slots(cache), step)
        elif in_place:
            self_bias = self._filled_positions_bias(cache, step)
        hidden, _, new_cache["layers"] = self.decoder(
            y,
            self_bias=self_bias,
            memory_bias=cache["memory_bias"],
            cache=cache["layers"],
            training=training,
            cache_position=step if in_place else None,
        )
        return self.logits(hidden[:, 0]), new_cache

    @staticmethod
    def _beam_slots(cache):
        """Hypotheses per cache row: the "slots" rows are [batch·beam], the keys/values [batch]."""
        return ops.shape(cache["slots"])[0] // ops.shape(cache["layers"]["layer_0"]["self"]["v"])[0]

    def _mark_own_slot(self, cache, step):
        """ "slots" [batch·beam, max_length] with position `step` set to each row's own slot."""
        slots = cache["slots"]
        own = ops.arange(ops.shape(slots)[0], dtype="int32") % self._beam_slots(cache)
        return ops.where(ops.arange(ops.shape(slots)[1]) == step, own[:, None], slots)

    @staticmethod
    def _slot_positions_bias(slots, beam, step):
        """[batch, 1, beam, max_length·beam]: row b of a sentence sees slot j at position t iff its
        "slots" row names j for t and t ≤ step (keys are at t·beam + j, as in the cache)."""
        max_length = ops.shape(slots)[1]
        named = ops.reshape(slots, (-1, beam, max_length, 1)) == ops.reshape(ops.arange(beam), (1, 1, 1, beam))
        visible = ops.logical_and(named, ops.reshape(ops.arange(max_length) <= step, (1, 1, max_length, 1)))
        return ops.reshape(ops.where(visible, 0.0, MASKED), (-1, 1, beam, max_length * beam))

    @staticmethod
    def _filled_positions_bias(cache, step):
        """[1, 1, 1, max_length] bias that lets a step attend to positions ≤ step of a preallocated cache."""
        max_length = ops.shape(cache["layers"]["layer_0"]["self"]["v"])[2]
        bias = ops.where(ops.arange(max_length) <= step, 0.0, MASKED)
        return ops.reshape(bias, (1, 1, 1, max_length))
