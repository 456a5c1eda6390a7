"""The CTranslate2 export: CTranslate2 itself, loading the converted model, computes what t2t_lite computes.

Teacher-forced log-probabilities from CTranslate2's `score_batch` are compared with t2t_lite's own
teacher-forced forward pass (`Transformer.__call__`, log-softmax), on tiny models whose every weight,
LayerNorm and bias included, is random (so a swapped or misplaced weight shows): post- and pre-LN,
sinusoidal and learned positions, unshared embeddings, key width ≠ value width, mixed-length batches
and a target holding the padding id. Greedy translations are compared on the word-reversal model that
test_export trains (shared through `built_once`), and on a random one, which emits id 0 and runs to
the length limit. Beam search differs by design (another length penalty and stopping rule): its BLEU
on a trained model is a figure in docs/results.md, not a test.
"""

import dataclasses
import json
import os
import shutil
import types

import full_disk
import kill_points
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import cpu_features, registry
from t2t_lite.cli import flags as cli_flags
from t2t_lite.cli import tool_process
from t2t_lite.data import vocabulary
from t2t_lite.decode import alignment, batch_decoding, scoring, translation
from t2t_lite.decode.decode_settings import DecodeHParams
from t2t_lite.decode.search_settings import SearchSettings
from t2t_lite.hparam import HParams
from t2t_lite.run_dir import averaging, checkpoints, model_info
from t2t_lite.serve import ctranslate2_export, export

ctranslate2 = pytest.importorskip("ctranslate2")

from test_export import (  # noqa: E402
    RELATIVE_SET,
    RELATIVE_TINY,
    STEP,
    TINY,
    build_relative_export,
    build_trained_export,
    padded,
    python_random_seed,
    random_sentences,
    run_exporter,
)
from test_translation import run_decoder  # noqa: E402

SMALL = "hidden_size=16,filter_size=24,num_heads=2,num_hidden_layers=2,max_length=20,layer_prepostprocess_dropout=0.0"
EXTRA_LENGTH = 6
# Shaw et al.'s relative positions alone (transformer_relative's), k small enough that the sources clip.
RELATIVE = "self_attention_type=dot_product_relative,max_relative_position=3,pos=none"


# -- A random tiny model, exported --------------------------------------------------------------
@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A translate_files data_dir holding only a small SentencePiece vocabulary."""
    path = tmp_path_factory.mktemp("ct2_data")
    problem = registry.problem("translate_files")
    vocabulary.train_vocabulary(
        random_sentences(seed=3, count=200, max_words=10), str(path / problem.vocab_filename()), 300
    )
    return str(path)


def random_model(hparams, vocab_size, seed):
    """A model whose every weight is random: LayerNorm gains around 1 and biases around 0, not 1 and 0."""
    with python_random_seed(seed):
        model = model_info.build_model(hparams, vocab_size)
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        noise = rng.normal(0.0, 0.3, weight.shape).astype(np.float32)
        weight.assign(weight.numpy() + noise)
    return model


def exported(tmp_path, data_dir, overrides, seed=0, adjust=None, decode_overrides=""):
    """(model, CTranslate2 model directory) of a random model (changed by `adjust`) saved as ckpt-1 and exported
    with --decode_hparams=extra_length=EXTRA_LENGTH plus `decode_overrides`."""
    hparams = registry.hparams("transformer_tiny").override(",".join(filter(None, [SMALL, overrides])))
    vocab = registry.problem("translate_files").vocabulary(data_dir)
    model = random_model(hparams, vocab.vocab_size, seed)
    if adjust is not None:
        adjust(model)
    train_dir = tmp_path / "train"
    checkpoints.checkpoint_manager(
        tf.train.Checkpoint(model=checkpoints.trackable_model(model)), str(train_dir), 1
    ).save(1)
    version = ctranslate2_export.export_ctranslate2(
        registry.problem("translate_files"),
        hparams,
        data_dir,
        str(train_dir),
        str(tmp_path / "export"),
        decode_overrides=",".join(filter(None, [f"extra_length={EXTRA_LENGTH}", decode_overrides])),
    )
    return model, version


def pieces_of(version, ids):
    processor = vocabulary.sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(version, ctranslate2_export.SENTENCEPIECE_FILE)
    )
    return [processor.id_to_piece(int(index)) for index in ids]


def teacher_forced_log_probs(model, sources, targets):
    """t2t_lite's log P(target_j | target_<j, source) for each target (EOS appended), from one padded batch."""
    inputs = padded([source + [vocabulary.EOS_ID] for source in sources])
    outputs = padded([target + [vocabulary.EOS_ID] for target in targets])
    log_probs = tf.nn.log_softmax(model({"inputs": inputs, "targets": outputs})).numpy()
    return [
        log_probs[row, np.arange(len(target) + 1), outputs[row, : len(target) + 1]]
        for row, target in enumerate(targets)
    ]


def ct2_log_probs(translator, version, sources, targets):
    results = translator.score_batch(
        [pieces_of(version, source) for source in sources], [pieces_of(version, target) for target in targets]
    )
    return [np.array(result.log_probs, np.float32) for result in results]


MIXED_SOURCES = [[5, 9, 14, 20, 33, 41, 7], [12], [3, 3, 8, 60, 61], [100, 101, 102, 103, 104, 105, 106, 107, 108]]
# The second and last targets hold the padding id 0 (the start symbol's id) in the middle.
MIXED_TARGETS = [[7, 8, 9], [44, 0, 45, 46, 47, 48], [], [90, 91, 0, 0, 92]]


@pytest.mark.parametrize(
    "overrides",
    [
        "",  # the paper: post-LN, sinusoids, one shared matrix
        "norm_position=pre",
        "pos=emb",
        "norm_position=pre,pos=emb,shared_embedding_and_softmax_weights=false,layer_norm_epsilon=1e-3",
        "attention_key_channels=8",  # d_k 4 < d_v 8: keys padded, queries scaled by 1/√d_k
        "attention_key_channels=24,attention_value_channels=12",  # d_k 12 > d_v 6: values padded
        "pos=none",  # no positions at all: CTranslate2 adds a table of zeros
        RELATIVE,  # w^K, w^V as relative_position_keys / _values
        RELATIVE + ",norm_position=pre,attention_key_channels=24,attention_value_channels=12",  # tables padded too
    ],
)
def test_score_batch_equals_the_teacher_forced_log_probs(overrides, data_dir, tmp_path):
    model, version = exported(tmp_path, data_dir, overrides)
    translator = ctranslate2.Translator(version, device="cpu", compute_type="float32")
    ours = teacher_forced_log_probs(model, MIXED_SOURCES, MIXED_TARGETS)
    theirs = ct2_log_probs(translator, version, MIXED_SOURCES, MIXED_TARGETS)
    for target, mine, other in zip(MIXED_TARGETS, ours, theirs):
        assert other.shape == (len(target) + 1,)  # every token and EOS
        np.testing.assert_allclose(other, mine, atol=1e-4, rtol=0)


def greedy_mismatches(model, translator, version, sources):
    """Sources whose greedy translations differ between the engines where t2t_lite's top two are > 1e-5 apart,
    and how many hypotheses contain id 0 and how many ran to the length limit."""
    inputs = [source + [vocabulary.EOS_ID] for source in sources]
    ids, _ = batch_decoding.decode_batch(
        model, padded(inputs), SearchSettings(beam_size=1, alpha=0.6, extra_length=EXTRA_LENGTH)
    )
    mismatches, with_padding, at_limit = [], 0, 0
    for source, row in zip(inputs, ids):
        ours = [int(i) for i in row]
        ours = (
            ours[: ours.index(vocabulary.EOS_ID)] if vocabulary.EOS_ID in ours else ours[: len(source) + EXTRA_LENGTH]
        )
        result = translator.translate_batch(
            [pieces_of(version, source[:-1])],
            beam_size=1,
            max_decoding_length=len(source) + EXTRA_LENGTH,
            min_decoding_length=0,
            max_input_length=0,
        )[0]
        theirs = [translator_vocabulary_id(version, piece) for piece in result.hypotheses[0]]
        with_padding += 0 in ours
        at_limit += len(ours) == len(source) + EXTRA_LENGTH
        if ours != theirs:
            first = next(j for j in range(min(len(ours), len(theirs)) + 1) if ours[j : j + 1] != theirs[j : j + 1])
            step = tf.nn.log_softmax(
                model({"inputs": padded([source]), "targets": padded([ours[:first] + [0]])})[0, first]
            ).numpy()
            top_two = np.sort(step)[-2:]
            if top_two[1] - top_two[0] > 1e-5:
                mismatches.append((source, ours, theirs))
    return mismatches, with_padding, at_limit


def translator_vocabulary_id(version, piece):
    processor = vocabulary.sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(version, ctranslate2_export.SENTENCEPIECE_FILE)
    )
    return processor.piece_to_id(piece)


def emits_padding(preferred):
    """Makes id 0's logit slightly above that of token `preferred` (the one a random model prefers), so greedy
    decoding emits id 0 at the start and after it, and then has to read its zero embedding."""

    def adjust(model):
        embeddings = model.softmax_weights.embeddings
        rows = embeddings.numpy()
        rows[0] = 1.05 * rows[preferred]
        embeddings.assign(rows)

    return adjust


# With the token each random model prefers: 32 with learned positions, 10 with relative ones.
@pytest.mark.parametrize("overrides,preferred", [("pos=emb", 32), (RELATIVE, 10)], ids=["emb", "relative"])
def test_greedy_translations_of_a_random_model_are_identical(overrides, preferred, data_dir, tmp_path):
    """A random model that emits id 0, whose embedding must stay zero after the first step, and runs to the limit
    (relative: each cached step's distances to the keys so far, clipped, as CTranslate2 computes them)."""
    model, version = exported(tmp_path, data_dir, overrides, seed=4, adjust=emits_padding(preferred))
    translator = ctranslate2.Translator(version, device="cpu", compute_type="float32")
    rng = np.random.default_rng(0)
    sources = [list(rng.integers(3, 300, size=length)) for length in (1, 2, 4, 7, 11, 13)]
    mismatches, with_padding, at_limit = greedy_mismatches(model, translator, version, sources)
    assert mismatches == []
    assert with_padding > 1 and at_limit > 1


# -- The trained word-reversal model of test_export ---------------------------------------------------
@pytest.fixture(scope="module")
def trained(built_once):
    root = built_once("trained_export", build_trained_export)
    hparams = registry.hparams("transformer_tiny").override(TINY)
    flags = [
        "--problem=translate_files",
        f"--data_dir={root / 'data'}",
        f"--output_dir={root / 'train'}",
        "--hparams_set=transformer_tiny",
        f"--hparams={TINY}",
        "--export_format=ctranslate2",
    ]
    return {"root": root, "hparams": hparams, "flags": flags}


@pytest.fixture(scope="module")
def trained_export(trained, tmp_path_factory):
    """The trained model averaged by t2t-avg-all's function (one checkpoint), exported by t2t-exporter."""
    base = tmp_path_factory.mktemp("ct2_trained")
    averaged = averaging.average_checkpoints(str(trained["root"] / "train"), str(base / "avg"), n=1)
    flags = [
        flag if not flag.startswith("--output_dir") else f"--output_dir={base / 'avg'}" for flag in trained["flags"]
    ]
    run_exporter(flags + [f"--export_dir={base / 'export'}", f"--decode_hparams=extra_length={EXTRA_LENGTH}"])
    problem = registry.problem("translate_files")
    vocab = problem.vocabulary(str(trained["root"] / "data"))
    model = model_info.restore_model(averaged, trained["hparams"], vocab.vocab_size)
    return {"version": str(base / "export" / str(STEP)), "model": model, "vocab": vocab, "flags": flags, "base": base}


def test_export_layout_and_config(trained_export):
    version = trained_export["version"]
    assert sorted(os.listdir(os.path.dirname(version))) == [str(STEP)]  # no staging directory left
    assert {"model.bin", "config.json", "shared_vocabulary.json", "sentencepiece.model", "t2t_export.json"} <= set(
        os.listdir(version)
    )
    with open(os.path.join(version, "config.json")) as file:
        config = json.load(file)
    assert config["decoder_start_token"] == config["bos_token"] == "<pad>" and config["add_source_eos"] is True
    assert config["layer_norm_epsilon"] == pytest.approx(1e-6)
    with open(os.path.join(version, "shared_vocabulary.json")) as file:
        assert len(json.load(file)) == trained_export["vocab"].vocab_size


@pytest.fixture(scope="module")
def relative_trained_export(built_once, tmp_path_factory):
    """test_export's transformer_relative_tiny twin (distances clipped at ±4), exported by t2t-exporter."""
    root, base = built_once("trained_export_relative", build_relative_export), tmp_path_factory.mktemp("ct2_relative")
    run_exporter(
        [
            "--problem=translate_files",
            f"--data_dir={root / 'data'}",
            f"--output_dir={root / 'train'}",
            f"--hparams_set={RELATIVE_SET}",
            f"--hparams={RELATIVE_TINY}",
            "--export_format=ctranslate2",
            f"--export_dir={base / 'export'}",
            f"--decode_hparams=extra_length={EXTRA_LENGTH}",
        ]
    )
    vocab = registry.problem("translate_files").vocabulary(str(root / "data"))
    hparams = registry.hparams(RELATIVE_SET).override(RELATIVE_TINY)
    model = model_info.restore_model(str(root / "train"), hparams, vocab.vocab_size)
    return {"version": str(base / "export" / str(STEP)), "model": model, "vocab": vocab}


@pytest.fixture(scope="module", params=["absolute", "relative"])
def either_trained_export(request):
    return request.getfixturevalue("trained_export" if request.param == "absolute" else "relative_trained_export")


def test_greedy_translations_of_a_trained_model_are_identical(either_trained_export):
    trained_export = either_trained_export
    translator = ctranslate2.Translator(trained_export["version"], device="cpu", compute_type="float32")
    vocab = trained_export["vocab"]
    sources = [vocab.encode(sentence) for sentence in random_sentences(seed=11, count=16)]
    mismatches, _, _ = greedy_mismatches(trained_export["model"], translator, trained_export["version"], sources)
    assert mismatches == []


def test_score_batch_equals_what_t2t_decoder_score_file_writes(either_trained_export):
    """The trained model on real subwords: CTranslate2's score_batch and `--score_file`'s per-subword terms."""
    trained_export = either_trained_export
    vocab = trained_export["vocab"]
    sentences = random_sentences(seed=5, count=6)
    pairs = [(sentence, " ".join(reversed(sentence.split()))) for sentence in sentences]
    ours = scoring.score_pairs(trained_export["model"], vocab, pairs, DecodeHParams.of(batch_size=4))
    translator = ctranslate2.Translator(trained_export["version"], device="cpu", compute_type="float32")
    sources, targets = ([vocab.encode(side) for side in sides] for sides in zip(*pairs))
    theirs = ct2_log_probs(translator, trained_export["version"], sources, targets)
    for mine, other in zip(ours, theirs):
        np.testing.assert_allclose(other, mine.per_token, atol=1e-4, rtol=0)
        assert float(other.sum()) == pytest.approx(mine.log_probability, abs=1e-3)


def test_an_empty_target_scores_as_ctranslate2s_score_batch_scores_it(trained_export, tmp_path):
    """The decoder's own empty translations scored back: log P(EOS | source), the one term both compute; an
    empty source, EOS alone, is scored alike by both."""
    vocab = trained_export["vocab"]
    sentences = random_sentences(seed=6, count=4)
    pairs = [(sentence, "") for sentence in sentences] + [("", sentences[0]), ("", "")]
    (tmp_path / "pairs.tsv").write_text("".join(f"{source}\t{target}\n" for source, target in pairs))
    run_decoder(
        "--problem=translate_files",
        f"--data_dir={os.path.dirname(vocab.model_path)}",
        f"--output_dir={trained_export['base'] / 'avg'}",
        f"--score_file={tmp_path / 'pairs.tsv'}",
        "--hparams_set=transformer_tiny",
        f"--hparams={TINY}",
    )
    written = [float(line) for line in (tmp_path / "pairs.tsv.scores").read_text().splitlines()]
    translator = ctranslate2.Translator(trained_export["version"], device="cpu", compute_type="float32")
    sources, targets = ([vocab.encode(side) for side in sides] for sides in zip(*pairs))
    theirs = ct2_log_probs(translator, trained_export["version"], sources, targets)
    assert [len(other) for other in theirs[:4]] == [1] * 4  # EOS alone
    np.testing.assert_allclose(written, [float(other.sum()) for other in theirs], atol=1e-4, rtol=0)


@pytest.fixture(scope="module")
def quantized_version(trained_export, tmp_path_factory):
    """`quantized_version(quantization)`: the version directory of `trained_export`'s checkpoint exported by
    t2t-exporter with --ct2_quantization, once per module and type: the two tests of a type only read it."""
    versions = {}

    def version_of(quantization):
        if quantization not in versions:
            export_dir = tmp_path_factory.mktemp(f"ct2_{quantization}")
            run_exporter(trained_export["flags"] + [f"--export_dir={export_dir}", f"--ct2_quantization={quantization}"])
            versions[quantization] = str(export_dir / str(STEP))
        return versions[quantization]

    return version_of


@pytest.mark.parametrize("quantization", ctranslate2_export.QUANTIZATIONS)
def test_quantized_exports_store_their_type_and_keep_the_scores_close(quantization, trained_export, quantized_version):
    version = quantized_version(quantization)
    float32_size = os.path.getsize(os.path.join(trained_export["version"], "model.bin"))
    size = os.path.getsize(os.path.join(version, "model.bin"))
    assert size < 0.9 * float32_size  # the matrices shrink (the positions table stays float32 with int8, int16)
    # The stored weights and scales, multiplied in float32: what the export wrote, on any CPU. An int8
    # weight is off by up to half its row's step (1/254 of the row's largest): on this one-layer model
    # that moves a log-probability by up to 0.27 and their mean by 0.03; 16-bit weights, by under 0.03.
    int8 = quantization.startswith("int8")
    assert_scores_close(trained_export, version, "float32", atol=0.5 if int8 else 0.2, mean_atol=0.1)


# CTranslate2 multiplies int8 as u8 × s8 pairs summed into int16, which saturates on x86 CPUs without
# int8 dot-product units (VNNI, AMX): there an int8 score of the word-reversal model moved by 1.9
# against float32's, so its own int8 kernels are compared only where they sum exactly. int16 runs as
# int8 on CPUs without CTranslate2's int16 kernels (its MKL's, Intel only): the bound follows the
# compute type it runs, an int8 one the same as int8 weights multiplied in float32.
@pytest.mark.skipif(
    cpu_features.int8_dot_units() is False,
    reason="no VNNI or AMX: CTranslate2's int8 products saturate here (docs/decoding-and-serving.md, CTranslate2)",
)
@pytest.mark.parametrize("quantization", ctranslate2_export.QUANTIZATIONS)
def test_quantized_exports_keep_the_scores_close_in_their_own_compute_type(
    quantization, trained_export, quantized_version
):
    version = quantized_version(quantization)
    runs_int8 = ctranslate2.Translator(version, device="cpu").compute_type.startswith("int8")
    int16_as_int8 = quantization == "int16" and "int16" not in ctranslate2.get_supported_compute_types("cpu")
    assert runs_int8 == (quantization.startswith("int8") or int16_as_int8)
    assert_scores_close(trained_export, version, "default", atol=0.5 if runs_int8 else 0.2, mean_atol=0.1)


def assert_scores_close(trained_export, version, compute_type, atol, mean_atol=None):
    translator = ctranslate2.Translator(version, device="cpu", compute_type=compute_type)
    vocab = trained_export["vocab"]
    sentences = random_sentences(seed=12, count=4)
    sources = [vocab.encode(sentence) for sentence in sentences]
    targets = [vocab.encode(" ".join(reversed(sentence.split()))) for sentence in sentences]
    ours = teacher_forced_log_probs(trained_export["model"], sources, targets)
    theirs = ct2_log_probs(translator, version, sources, targets)
    for mine, other in zip(ours, theirs):
        np.testing.assert_allclose(other, mine, atol=atol)
    if mean_atol is not None:
        assert np.mean(np.abs(np.concatenate(theirs) - np.concatenate(ours))) <= mean_atol


# -- Bad input: one line each, nothing half-written ------------------------------------------------
def test_an_existing_version_is_never_overwritten(trained_export):
    model_bin = os.path.join(trained_export["version"], "model.bin")
    before = os.stat(model_bin).st_mtime_ns
    with pytest.raises(cli_flags.UsageError, match=f"{STEP} already exists.*never overwritten") as error:
        run_exporter(trained_export["flags"] + [f"--export_dir={os.path.dirname(trained_export['version'])}"])
    assert "\n" not in str(error.value)
    assert os.stat(model_bin).st_mtime_ns == before


def test_a_damaged_checkpoint_is_named_and_nothing_is_written(trained, tmp_path):
    train_dir = tmp_path / "train"
    shutil.copytree(trained["root"] / "train", train_dir)
    data = next(str(train_dir / name) for name in os.listdir(train_dir) if ".data-" in name)
    os.truncate(data, os.path.getsize(data) // 2)
    flags = [flag if not flag.startswith("--output_dir") else f"--output_dir={train_dir}" for flag in trained["flags"]]
    with pytest.raises(cli_flags.UsageError, match=f"ckpt-{STEP} is damaged.*--checkpoint_path") as error:
        run_exporter(flags + [f"--export_dir={tmp_path / 'export'}"])
    assert "\n" not in str(error.value)
    assert os.listdir(tmp_path) == ["train"]


def test_a_setting_ctranslate2_cannot_represent_is_refused_by_name(data_dir, tmp_path):
    # A later architectural hparam the converter does not map, set away from its default.
    extended = dataclasses.make_dataclass(
        "ExtendedHParams", [("ffn_gated_linear_units", bool, False)], bases=(HParams,), frozen=True
    )
    hparams = extended(**registry.hparams("transformer_tiny").override(SMALL).values(), ffn_gated_linear_units=True)
    with pytest.raises(export.ExportError, match="hparam ffn_gated_linear_units=True") as error:
        ctranslate2_export.export_ctranslate2(
            registry.problem("translate_files"), hparams, data_dir, str(tmp_path), str(tmp_path / "export")
        )
    assert "\n" not in str(error.value)
    assert not (tmp_path / "export").exists()


def test_relative_positions_with_absolute_ones_are_refused_by_name(data_dir, tmp_path):
    """CTranslate2's relative position spec holds no position table, so pos=timing on top cannot convert."""
    hparams = registry.hparams("transformer_tiny").override(f"{SMALL},{RELATIVE}").replace(pos="timing")
    with pytest.raises(export.ExportError, match="hparam pos='timing' with self_attention_type=dot_product_relative"):
        ctranslate2_export.export_ctranslate2(
            registry.problem("translate_files"), hparams, data_dir, str(tmp_path), str(tmp_path / "export")
        )
    assert not (tmp_path / "export").exists()


def test_without_ctranslate2_the_tool_says_how_to_install_it_before_any_work(trained, tmp_path, monkeypatch):
    real_find_spec = ctranslate2_export.importlib.util.find_spec
    monkeypatch.setattr(
        ctranslate2_export.importlib.util,
        "find_spec",
        lambda name, *args: None if name == "ctranslate2" else real_find_spec(name, *args),
    )
    # The data_dir does not exist: the missing package is named first.
    flags = [
        flag if not flag.startswith("--data_dir") else f"--data_dir={tmp_path / 'nowhere'}" for flag in trained["flags"]
    ]
    with pytest.raises(
        cli_flags.UsageError, match=r'needs the ctranslate2 package: pip install "t2t_lite\[ctranslate2\]"'
    ):
        run_exporter(flags + [f"--export_dir={tmp_path / 'export'}"])
    assert not (tmp_path / "export").exists()


def test_quantization_flag_errors(trained, tmp_path):
    with pytest.raises(cli_flags.UsageError, match="--ct2_quantization=int4: not one of CTranslate2's int8"):
        run_exporter(trained["flags"] + [f"--export_dir={tmp_path}", "--ct2_quantization=int4"])
    savedmodel = [flag for flag in trained["flags"] if not flag.startswith("--export_format")]
    with pytest.raises(cli_flags.UsageError, match="--ct2_quantization: only with --export_format=ctranslate2"):
        run_exporter(savedmodel + [f"--export_dir={tmp_path}", "--ct2_quantization=int8"])
    assert os.listdir(tmp_path) == []


# -- Alignments: return_attention is the attention t2t-decoder's write_alignment reads ---------------
def ct2_attention(translator, version, source):
    """CTranslate2's greedy translation of `source` ids: (its ids, return_attention's [target, source]): it has
    no row for the target's EOS and no column for the EOS it appends to the source."""
    result = translator.translate_batch(
        [pieces_of(version, source)],
        beam_size=1,
        max_decoding_length=len(source) + 1 + EXTRA_LENGTH,
        min_decoding_length=0,
        return_attention=True,
    )[0]
    return [translator_vocabulary_id(version, piece) for piece in result.hypotheses[0]], np.array(result.attention[0])


@pytest.mark.parametrize("layer, heads", [(0, 1), (-1, 0), (1, 2)])
def test_return_attention_is_the_export_s_alignment_layer_and_heads(data_dir, tmp_path, layer, heads):
    """A random two-layer model exported with alignment_layer/alignment_heads: CTranslate2's attention for its
    output equals t2t_lite's, that layer's heads averaged, for the same pair."""
    model, version = exported(
        tmp_path, data_dir, "", seed=6, decode_overrides=f"alignment_layer={layer},alignment_heads={heads}"
    )
    with open(os.path.join(version, "t2t_export.json")) as file:
        assert json.load(file)["alignment"] == {"layer": layer, "heads": heads or "all"}
    translator = ctranslate2.Translator(version, device="cpu", compute_type="float32")
    settings = alignment.AlignmentSettings(True, layer, heads)
    for source in MIXED_SOURCES:
        ids, theirs = ct2_attention(translator, version, source)
        inputs, targets = padded([source + [vocabulary.EOS_ID]]), padded([ids + [vocabulary.EOS_ID]])
        ours = alignment.layer_attention(model, inputs, targets, settings).numpy()[0, : len(ids), : len(source)]
        np.testing.assert_allclose(theirs, ours, atol=1e-4)


def test_return_attention_merged_into_words_gives_t2t_decoders_alignment(trained_export):
    """The trained word-reversal model: CTranslate2's greedy output and its attention, merged by
    `alignment.word_links`, give the links t2t-decoder writes for the same sentence."""
    translator = ctranslate2.Translator(trained_export["version"], device="cpu", compute_type="float32")
    vocab = trained_export["vocab"]
    sentences = random_sentences(seed=13, count=8)
    settings = DecodeHParams.of(beam_size=1, extra_length=EXTRA_LENGTH, write_alignment=True)
    decoded = translation.translate(trained_export["model"], vocab, sentences, settings, progress=False)
    for sentence, ours in zip(sentences, decoded):
        source = vocab.encode(sentence)
        ids, attention = ct2_attention(translator, trained_export["version"], source)
        assert vocab.decode(ids) == ours.hypotheses[0]
        weights = np.pad(attention, [(0, 1), (0, 1)])[None]  # zeros for both EOS, which link nothing
        links = alignment.word_links(
            weights, padded([source + [vocabulary.EOS_ID]]), padded([ids + [vocabulary.EOS_ID]]), *vocab.word_pieces()
        )
        assert alignment.pharaoh(links).numpy()[0].decode() == ours.alignments[0]
    assert any(ours.alignments[0] for ours in decoded)


@pytest.fixture(scope="module")
def random_run(data_dir, tmp_path_factory):
    """A directory with `exported`'s random model as ckpt-1 in train/, made once per module: the tests that export
    that checkpoint again (killed, on a full disk) only read it."""
    root = tmp_path_factory.mktemp("ct2_random_run")
    exported(root, data_dir, "")
    return root


@pytest.mark.parametrize("killed_in", ["copyfile", "dump"])  # model.bin saved; the vocabulary copied too
def test_a_killed_export_leaves_no_version_and_the_next_export_removes_its_staging_in_one_line(
    data_dir, random_run, tmp_path, monkeypatch, capsys, killed_in
):
    export_dir, killed = tmp_path / "export_killed", str(tmp_path / "killed")
    export_dir.mkdir()
    copies = types.SimpleNamespace(copyfile=shutil.copyfile, rmtree=shutil.rmtree)
    records = types.SimpleNamespace(dump=json.dump, dumps=json.dumps, loads=json.loads)
    monkeypatch.setattr(ctranslate2_export, "shutil", copies)
    monkeypatch.setattr(ctranslate2_export, "json", records)
    owner = copies if killed_in == "copyfile" else records
    kill_points.kill_at(monkeypatch, owner, killed_in, str(export_dir), killed)
    with pytest.raises(kill_points.Killed):
        export_into(random_run, data_dir, str(export_dir))
    monkeypatch.undo()
    (staging,) = os.listdir(killed)
    assert staging.startswith(".1.incomplete-")  # hidden, not a version: servers and tools never read it
    capsys.readouterr()
    version = export_into(random_run, data_dir, killed)
    assert (
        capsys.readouterr().err == f"Removed {staging} from {killed}: left unfinished by an interrupted t2t-exporter.\n"
    )
    assert os.listdir(killed) == ["1"] and ctranslate2.Translator(version, device="cpu")


def test_an_export_on_a_full_disk_stops_naming_the_file_and_leaves_nothing(data_dir, random_run, small_disk):
    export_dir = str(small_disk / "export")
    filler = full_disk.fill(small_disk, leave=16 * 1024)
    with pytest.raises(Exception) as error:
        export_into(random_run, data_dir, export_dir)
    message = tool_process.disk_full_message(error.value)
    assert message is not None, error.value
    assert (
        message.startswith(f"the disk holding {export_dir} is full") and f"could not write {export_dir}/1. " in message
    )
    assert os.listdir(export_dir) == []
    os.remove(filler)
    assert os.listdir(export_into(random_run, data_dir, export_dir))


def export_into(run, data_dir, export_dir):
    """The ckpt-1 that `exported` saved in run/train (`random_run`), exported again into export_dir."""
    return ctranslate2_export.export_ctranslate2(
        registry.problem("translate_files"),
        registry.hparams("transformer_tiny").override(SMALL),
        data_dir,
        str(run / "train"),
        export_dir,
        decode_overrides=f"extra_length={EXTRA_LENGTH}",
    )
