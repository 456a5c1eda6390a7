"""HParams: the one configuration object that every part of t2t_lite reads.

A frozen dataclass with tensor2tensor's field names, so a tensor2tensor user's
`--hparams "num_heads=16,layer_prepostprocess_dropout=0.3"` means the same here.
Named sets (`transformer_base`, ...) live in `hparams/` and are registered with
`t2t_lite.registry.register_hparams`; they derive from each other with
`dataclasses.replace`, never by mutating a parent.

    hp = registry.hparams("transformer_base").override("num_heads=16")
    hp.num_heads            # 16
    HParams.from_json(hp.to_json()) == hp
"""

import dataclasses
import difflib
import json
import math
import typing

POSITION_ENCODINGS = ("timing", "emb", "none")
SELF_ATTENTION_TYPES = ("dot_product", "dot_product_relative")
NORM_POSITIONS = ("post", "pre")
ACTIVATION_DTYPES = ("float32", "bfloat16", "float16")


class HParamsError(ValueError):
    """An unknown hyperparameter name or a value that cannot be parsed or is out of range."""


@dataclasses.dataclass(frozen=True)
class HParams:
    """Hyperparameters of the Transformer, its training and its decoding.

    Defaults are the paper's base model (Vaswani et al. 2017, Table 3 "base");
    `hparams/transformer.py` names the sets that users select with `--hparams_set`.
    """

    # --- Architecture (§3) ---
    hidden_size: int = 512  # d_model: width of embeddings and every sub-layer output.
    filter_size: int = 2048  # d_ff: inner width of the position-wise feed-forward network (eq. 2).
    num_heads: int = 8  # h: parallel attention heads (§3.2.2).
    num_hidden_layers: int = 6  # N: layers in each stack, unless the two below are set.
    num_encoder_layers: int = 0  # Encoder layers; 0 = num_hidden_layers.
    num_decoder_layers: int = 0  # Decoder layers; 0 = num_hidden_layers.
    attention_key_channels: int = 0  # h·d_k, total query/key width; 0 = hidden_size.
    attention_value_channels: int = 0  # h·d_v, total value width; 0 = hidden_size.
    pos: str = "timing"  # Positions: "timing" sinusoids (§3.5), "emb" learned (Table 3 row E) or "none".
    # "dot_product" (eq. 1) or "dot_product_relative": self-attention with learned relative positions
    # (Shaw et al. 2018, eq. 3-5; `model/relative_position.py`), tensor2tensor's transformer_relative.
    self_attention_type: str = "dot_product"
    max_relative_position: int = 20  # k of Shaw et al.: distances beyond ±k share one embedding.
    norm_position: str = "post"  # LayerNorm after each residual ("post", the paper) or before ("pre").
    layer_norm_epsilon: float = 1e-6  # Epsilon of every LayerNorm (tensor2tensor's value).
    shared_embedding_and_softmax_weights: bool = True  # One matrix for source, target and pre-softmax (§3.4).

    # --- Regularization (§5.4) ---
    layer_prepostprocess_dropout: float = 0.1  # P_drop on sub-layer outputs and embedding+position sums.
    attention_dropout: float = 0.0  # Dropout on attention weights (not used by the paper's base).
    relu_dropout: float = 0.0  # Dropout inside the feed-forward network (not used by the paper's base).
    # Not the paper: tensor2tensor's word dropout. Each source and decoder-input id becomes padding (0) with
    # this probability while training, so it embeds to zero and a dropped source word is masked out.
    symbol_dropout: float = 0.0
    label_smoothing: float = 0.1  # ε_ls of the smoothed cross-entropy.

    # --- Guided alignment (Garg et al. 2019; t2t_lite/train/guided_alignment.py), not the paper ---
    # λ of L = L_ce + λ·L_a: the chosen heads' attention is trained toward the training pairs' word links
    # (t2t-datagen --train_alignments); 0 = off. Garg et al.'s fairseq recipe uses 0.05.
    guided_alignment_weight: float = 0.0
    # The decoder layer whose encoder-decoder attention is supervised, Python-indexed: -2, the penultimate,
    # is where Garg et al. found supervision best (of six layers; fairseq's alignment_layer default too).
    guided_alignment_layer: int = -2
    guided_alignment_heads: int = 1  # Its first N heads, averaged, are supervised: Garg et al. supervise one.

    # --- Optimizer and schedule (§5.3) ---
    learning_rate: float = 1.0  # Multiplier on eq. 3; 1.0 is the paper's schedule exactly.
    learning_rate_warmup_steps: int = 4000  # warmup_steps of eq. 3.
    # Not the paper: eq. 3 falls linearly to zero over the last this-many of --train_steps; 0 = off.
    learning_rate_decay_steps: int = 0
    optimizer_adam_beta1: float = 0.9  # Adam β1.
    optimizer_adam_beta2: float = 0.98  # Adam β2.
    optimizer_adam_epsilon: float = 1e-9  # Adam ε.
    clip_grad_norm: float = 0.0  # Global-norm gradient clipping; 0 = off (the paper does not clip).

    # --- Batching (§5.1) ---
    batch_size: int = 4096  # Tokens in one micro-batch per replica (padded longer side, as tensor2tensor).
    # Tokens per optimizer step, reached by gradient accumulation; 0 = one micro-batch. Counted as batch_size
    # does (padded slots of the longer side, as tensor2tensor), so real target tokens are somewhat fewer.
    tokens_per_step: int = 25000
    max_length: int = 256  # Longest example kept for training, in subword tokens; 0 = batch_size (tensor2tensor).
    min_length_bucket: int = 8  # Upper bound of the shortest length bucket.
    length_bucket_step: float = 1.1  # Each bucket boundary is this factor above the previous one.

    # --- Speed switches ---
    activation_dtype: str = "float32"  # Compute dtype: "float32", "bfloat16" or "float16" (loss-scaled).
    xla_compile: bool = False  # Compile the training step with XLA.

    # --- Decoding defaults (§6.1); a problem or --decode_hparams may override them ---
    beam_size: int = 4  # Beam width; 1 = greedy.
    alpha: float = 0.6  # Length penalty exponent α of ((5+|Y|)/6)^α.
    extra_length: int = 50  # Maximum output length = input length + extra_length.

    def __post_init__(self):
        self._check_ranges()

    # -- Derived values, so no caller recomputes them --------------------------------
    @property
    def encoder_layers(self) -> int:
        return self.num_encoder_layers or self.num_hidden_layers

    @property
    def decoder_layers(self) -> int:
        return self.num_decoder_layers or self.num_hidden_layers

    @property
    def relative_positions(self) -> int:
        """k of Shaw et al. when self-attention uses relative positions, else 0."""
        return self.max_relative_position if self.self_attention_type == "dot_product_relative" else 0

    @property
    def key_channels(self) -> int:
        return self.attention_key_channels or self.hidden_size

    @property
    def value_channels(self) -> int:
        return self.attention_value_channels or self.hidden_size

    # -- Overrides --------------------------------------------------------------------
    @classmethod
    def names(cls) -> list:
        return [field.name for field in dataclasses.fields(cls)]

    def override(self, overrides: str) -> "HParams":
        """Returns a copy with `"name=value,name=value"` applied (tensor2tensor's syntax)."""
        return self.replace(**parse_overrides(type(self), overrides))

    def replace(self, **changes) -> "HParams":
        """Returns a copy with the given fields changed; unknown names raise HParamsError."""
        for name in changes:
            self._check_name(name)
        return dataclasses.replace(self, **changes)

    def values(self) -> dict:
        return dataclasses.asdict(self)

    # -- Serialization, so a model's settings live beside its checkpoints -------------
    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.values(), indent=indent, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "HParams":
        """The HParams `to_json` wrote; HParamsError names what is not JSON, an unknown name or a mistyped value."""
        try:
            values = json.loads(text)
        except json.JSONDecodeError as error:
            raise HParamsError(f"not JSON ({error})") from None
        if not isinstance(values, dict):
            raise HParamsError(f"holds {_JSON_TYPES[type(values)]}, not a JSON object of hparam names and values")
        return cls(**{name: _json_value(cls, name, value) for name, value in values.items()})

    # -- Validation -------------------------------------------------------------------
    @classmethod
    def _check_name(cls, name: str) -> None:
        check_name(cls, name)

    def _check_ranges(self) -> None:
        def fail(name, what):
            raise HParamsError(f"hparam {name}={getattr(self, name)!r}: {what}.")

        for name in ("hidden_size", "filter_size", "num_heads", "num_hidden_layers", "batch_size"):
            if getattr(self, name) <= 0:
                fail(name, "must be positive")
        for name in (
            "attention_key_channels",
            "attention_value_channels",
            "num_encoder_layers",
            "num_decoder_layers",
            "tokens_per_step",
            "max_length",
            "learning_rate_warmup_steps",
            "learning_rate_decay_steps",
            "extra_length",
        ):
            if getattr(self, name) < 0:
                fail(name, "must be zero or positive")
        for name in (
            "layer_prepostprocess_dropout",
            "attention_dropout",
            "relu_dropout",
            "symbol_dropout",
            "label_smoothing",
            "optimizer_adam_beta1",
            "optimizer_adam_beta2",
        ):
            if not 0.0 <= getattr(self, name) < 1.0:
                fail(name, "must be in [0, 1)")
        for name in ("learning_rate", "optimizer_adam_epsilon"):
            if not getattr(self, name) > 0.0:  # also catches NaN
                fail(name, "must be positive")
        if not self.clip_grad_norm >= 0.0:
            fail("clip_grad_norm", "must be zero (off) or positive")
        for name in ("key_channels", "value_channels"):
            if getattr(self, name) % self.num_heads:
                fail("attention_" + name, f"must be divisible by num_heads={self.num_heads}")
        if self.pos not in POSITION_ENCODINGS:
            fail("pos", f"must be one of {POSITION_ENCODINGS}")
        if self.self_attention_type not in SELF_ATTENTION_TYPES:
            fail("self_attention_type", f"must be one of {SELF_ATTENTION_TYPES}")
        if self.max_relative_position < 1:
            fail(
                "max_relative_position",
                "must be at least 1 (distances beyond ±max_relative_position share one embedding; "
                "self_attention_type=dot_product turns relative positions off)",
            )
        if self.norm_position not in NORM_POSITIONS:
            fail("norm_position", f"must be one of {NORM_POSITIONS}")
        if self.activation_dtype not in ACTIVATION_DTYPES:
            fail("activation_dtype", f"must be one of {ACTIVATION_DTYPES}")
        if self.beam_size < 1:
            fail("beam_size", "must be at least 1")
        if not self.length_bucket_step > 1.0:  # also catches NaN
            fail("length_bucket_step", "must be greater than 1")
        if not 0.0 <= self.alpha < math.inf:
            fail("alpha", "must be a finite number ≥ 0 (the length penalty's exponent; 0 = none)")
        if not self.layer_norm_epsilon > 0.0:
            fail("layer_norm_epsilon", "must be positive")
        if self.min_length_bucket < 1:
            fail("min_length_bucket", "must be at least 1")
        self._check_guided_alignment(fail)

    def _check_guided_alignment(self, fail) -> None:
        """The supervised layer and heads must exist, but only when guidance is on (every set has it off)."""
        if not 0.0 <= self.guided_alignment_weight < math.inf:
            fail("guided_alignment_weight", "must be a finite number ≥ 0 (λ of the alignment loss; 0 = off)")
        if not self.guided_alignment_weight:
            return
        layers = self.decoder_layers
        if not -layers <= self.guided_alignment_layer < layers:
            fail(
                "guided_alignment_layer",
                f"the decoder has {layers} layers: give 0..{layers - 1}, or -1..-{layers} counted from the last",
            )
        if not 1 <= self.guided_alignment_heads <= self.num_heads:
            fail("guided_alignment_heads", f"each layer has {self.num_heads} heads: give 1..{self.num_heads}")


def check_name(config_class, name: str) -> None:
    """Raises HParamsError, with the nearest and all valid names, for a name `config_class` lacks."""
    names = list(field_types(config_class))
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise HParamsError(f"Unknown hparam {name!r}.{hint} Valid names: {', '.join(sorted(names))}.")


def field_types(config_class) -> dict:
    """{name: type} of a dataclass' settings, a field that holds a settings dataclass counted by its own fields.

    So a composed settings object (t2t-decoder's, holding the search's) takes one flat
    `--decode_hparams` namespace, each name still defined once, by the class it belongs to.
    """
    types = {}
    for name, kind in typing.get_type_hints(config_class).items():
        types.update(field_types(kind) if dataclasses.is_dataclass(kind) else {name: kind})
    return types


def setting(default, help: str, *, flag: str = None, choices=None):
    """A settings field that a tool's flag sets: its default, its help, and the flag's name (default: the field's).

    The flag is generated from the field (`t2t_lite.cli.settings_flags`), so a setting is written once:
    `train_steps: int = setting(250000, "Optimizer updates to train for.")`. `choices` makes an enum flag.
    """
    return dataclasses.field(default=default, metadata={"help": help, "flag": flag, "choices": choices})


class Composed:
    """Flat construction for a settings dataclass that composes others (t2t-decoder's, an export's).

    DecodeHParams.of(beam_size=3, batch_size=2)      # the search's field and the run's, by name
    settings.replaced(xla=True)                     # a copy, one name changed wherever it lives
    """

    @classmethod
    def of(cls, **values):
        return compose(cls, values)

    def replaced(self, **changes):
        for name in changes:
            check_name(type(self), name)
        return compose(type(self), {**flat_values(self), **changes})


def compose(config_class, values: dict):
    """An instance of `config_class` from flat {name: value} (`field_types`' names); absent names keep defaults."""
    changes = {}
    for name, kind in typing.get_type_hints(config_class).items():
        if dataclasses.is_dataclass(kind):
            changes[name] = compose(kind, values)
        elif name in values:
            changes[name] = values[name]
    return config_class(**changes)


def flat_values(settings) -> dict:
    """{name: value} of a (composed) settings object, the names `compose` takes: what a run records."""
    values = {}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        values.update(flat_values(value) if dataclasses.is_dataclass(value) else {field.name: value})
    return values


def parse_overrides(config_class, overrides: str) -> dict:
    """`"name=value,name=value"` -> {name: typed value} for the fields of a dataclass (`field_types`).

    Used by HParams (--hparams) and by the decoder's settings (--decode_hparams), so
    both accept the same syntax and fail the same way.
    """
    changes = {}
    for item in (item.strip() for item in (overrides or "").split(",")):
        if not item:
            continue
        if "=" not in item:
            raise HParamsError(f"Override {item!r} is not of the form name=value (e.g. {_example(config_class)}).")
        name, text = (part.strip() for part in item.split("=", 1))
        if name in changes:  # which one was meant? say so rather than let the last win
            raise HParamsError(f"hparam {name} is given twice ({name}={changes[name]!r} and {item!r}); keep one.")
        changes[name] = _parse_value(config_class, name, text)
    return changes


def _example(config_class) -> str:
    """`name=default` of the first setting (of the first composed one, if the class starts with one)."""
    first = dataclasses.fields(config_class)[0]
    if dataclasses.is_dataclass(first.default):
        return _example(type(first.default))
    return f"{first.name}={first.default}"


# The JSON names of what json.loads gives, and of what each field type takes.
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number"}
_JSON_TYPES.update({bool: "true or false", type(None): "null"})
_EXPECTED_IN_JSON = {int: "a whole number", float: "a number", bool: "true or false", str: "a string"}


def _json_value(config_class, name: str, value):
    """A value read from JSON as the field's type: an int field takes 128 (or 128.0), never 128.5 or "128"."""
    check_name(config_class, name)
    kind = field_types(config_class)[name]
    if kind is float and type(value) in (int, float):
        return float(value)
    if kind is int and type(value) is float and value.is_integer():
        return int(value)
    if type(value) is kind:
        return value
    raise HParamsError(f"hparam {name}={json.dumps(value)}: expected {_EXPECTED_IN_JSON[kind]}")


def _parse_value(config_class, name: str, text: str):
    check_name(config_class, name)
    kind = field_types(config_class)[name]
    names = ", ".join(sorted(field_types(config_class)))
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return lowered in ("true", "1")
        if kind is int:
            number = float(text)  # accepts "4e3" as tensor2tensor users write it
            if number != int(number):
                raise ValueError(text)
            return int(number)
        return kind(text)
    except ValueError:
        raise HParamsError(f"hparam {name}={text!r}: expected a {kind.__name__}. Valid names: {names}.") from None
