"""The serving export: a SavedModel that loads with TensorFlow and tensorflow-text alone and
translates raw text exactly as the library's decoder (`decode_batch` + `Vocabulary.decode`) does.

The model is a tiny Transformer trained here for a few seconds to reverse the order of words,
so its translations differ from sentence to sentence, some end in EOS and some run to the
length limit; the export is written once per module by the `t2t-exporter` tool itself.
"""

import contextlib
import json
import os
import random
import re
import subprocess
import sys

import forkserver
import full_disk
import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops an export's graph runs, built into TF Serving)
from absl import flags as absl_flags

from t2t_lite import registry
from t2t_lite.cli import t2t_exporter, tool_process
from t2t_lite.data import vocabulary
from t2t_lite.decode import batch_decoding, beam_search, decode_settings, model_loading, scoring, translation
from t2t_lite.decode.search_settings import SearchSettings
from t2t_lite.hparam import HParamsError
from t2t_lite.run_dir import checkpoints, model_info
from t2t_lite.serve import export, xla_buckets
from t2t_lite.serve.export_settings import ExportSettings, export_settings

WORDS = (
    "der die das haus katze hund über grün straße läuft schnell the cat dog house green street runs quickly"
).split()
TINY = "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,max_length=12,layer_prepostprocess_dropout=0.0"
# max_batch_size 8: the XLA exports compile three batch buckets (1, 4, 8), and chunks of 8 are decoded in one call.
DECODE = {"beam_size": 3, "alpha": 0.6, "extra_length": 4, "max_input_length": 10, "max_batch_size": 8}
STEP = 150


def random_sentences(seed, count, max_words=6):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, max_words))) for _ in range(count)]


def padded(sequences):
    batch = np.zeros((len(sequences), max(len(sequence) for sequence in sequences)), np.int32)
    for row, sequence in enumerate(sequences):
        batch[row, : len(sequence)] = sequence
    return batch


def train_word_reversal(model, vocab, steps):
    """A few hundred Adam steps on "reverse the words": enough for input-dependent translations."""
    sentences = random_sentences(seed=0, count=512)
    inputs = [vocab.encode(s) + [1] for s in sentences]
    targets = [vocab.encode(" ".join(reversed(s.split()))) + [1] for s in sentences]
    optimizer = keras.optimizers.Adam(3e-3)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model({"inputs": x, "targets": y}, training=True)
            losses = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
            weights = tf.cast(y != 0, tf.float32)
            loss = tf.reduce_sum(losses * weights) / tf.reduce_sum(weights)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    for i in range(steps):
        first = (i * 32) % len(sentences)
        step(padded(inputs[first : first + 32]), padded(targets[first : first + 32]))
    return optimizer


@contextlib.contextmanager
def python_random_seed(seed):
    """Keras seeds unseeded initializers from Python's `random`: seed it for this block only,
    so the weights are reproducible and other tests' random state is left as it was."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


def run_exporter(argv):
    absl_flags.FLAGS.unparse_flags()
    absl_flags.FLAGS(["t2t-exporter"] + argv)
    t2t_exporter.main([])


def build_trained_export(root, hparams_set="transformer_tiny", overrides=TINY, decode=None):
    """Train the word-reversal model and export it with `t2t-exporter` (DECODE plus `decode`), under root."""
    problem = registry.problem("translate_files")
    vocab = vocabulary.train_vocabulary(
        random_sentences(seed=1, count=300, max_words=12), os.path.join(root / "data", problem.vocab_filename()), 400
    )
    with python_random_seed(1):
        model = model_info.build_model(registry.hparams(hparams_set).override(overrides), vocab.vocab_size)
    optimizer = train_word_reversal(model, vocab, STEP)
    # A training checkpoint with the optimizer's state, which the export must leave out.
    checkpoints.checkpoint_manager(checkpoints.training_checkpoint(model, optimizer), str(root / "train"), 2).save(STEP)
    run_exporter(exporter_flags(root, hparams_set, overrides, decode))


def exporter_flags(root, hparams_set="transformer_tiny", overrides=TINY, decode=None):
    """The t2t-exporter command line of the module's export (DECODE plus `decode`)."""
    return [
        "--problem=translate_files",
        f"--data_dir={root / 'data'}",
        f"--output_dir={root / 'train'}",
        f"--export_dir={root / 'export'}",
        f"--hparams_set={hparams_set}",
        f"--hparams={overrides}",
        decode_flag(**(decode or {})),
    ]


def decode_flag(**settings):
    """--decode_hparams: the module's DECODE settings, with `settings` added or replaced."""
    return "--decode_hparams=" + ",".join(f"{name}={value}" for name, value in {**DECODE, **settings}.items())


def export_again(setup, export_dir, **settings):
    """The same checkpoint exported into export_dir with DECODE plus `settings`; its version directory."""
    flags = [flag for flag in setup["flags"] if not flag.startswith(("--export_dir", "--decode_hparams"))]
    run_exporter(flags + [f"--export_dir={export_dir}", decode_flag(**settings)])
    return os.path.join(export_dir, str(STEP))


def trained_setup(root, hparams_set="transformer_tiny", overrides=TINY, decode=None):
    problem, hparams = registry.problem("translate_files"), registry.hparams(hparams_set).override(overrides)
    data_dir, train_dir = str(root / "data"), str(root / "train")
    return {
        "version_dir": os.path.join(root, "export", str(STEP)),
        "flags": exporter_flags(root, hparams_set, overrides, decode),
        "vocab": problem.vocabulary(data_dir),
        "root": root,
        "hparams": hparams,
        "model": model_loading.load_model_for_decoding(problem, hparams, data_dir, train_dir),
    }


@pytest.fixture(scope="module")
def setup(built_once):
    """The trained model and its export, made once per test run (test_warmup uses them too)."""
    return trained_setup(built_once("trained_export", build_trained_export))


# The same model and training with Shaw et al.'s relative positions instead of sinusoids (tensor2tensor's set),
# distances clipped to ±4 so that the sentences (up to 12 subwords, + 4 when decoding) clip them. Its export
# also writes alignments: the signatures' other outputs are computed as without them, so the relative tests
# and the write_alignment tests read one export instead of exporting the checkpoint once more.
RELATIVE_SET, RELATIVE_TINY = "transformer_relative_tiny", TINY + ",max_relative_position=4"
RELATIVE_DECODE = {"write_alignment": "true"}


def build_relative_export(root):
    """`build_trained_export` of the relative twin (test_ctranslate2_export builds it with this too)."""
    build_trained_export(root, RELATIVE_SET, RELATIVE_TINY, RELATIVE_DECODE)


@pytest.fixture(scope="module")
def relative_setup(built_once):
    """The relative twin of `setup`, exported with write_alignment: trained and exported once per test run
    (test_ctranslate2_export uses it)."""
    root = built_once("trained_export_relative", build_relative_export)
    return trained_setup(root, RELATIVE_SET, RELATIVE_TINY, RELATIVE_DECODE)


@pytest.fixture(scope="module")
def loaded_version():
    """`loaded_version(version_dir)`: tf.saved_model.load of that export, once per module and export.

    Loading a version and the first call of each of its signatures take seconds, and the tests only call
    its signatures, which keep no state between calls (a draw's seed is the export's setting), so the
    tests of one export share one loaded copy.
    """
    loaded = {}

    def load(version_dir):
        if version_dir not in loaded:
            loaded[version_dir] = tf.saved_model.load(version_dir)
        return loaded[version_dir]

    return load


@pytest.fixture(scope="module", params=["absolute", "relative"])
def either_setup(request):
    """`setup`, then `relative_setup`: for the tests that must hold for both kinds of positions."""
    return request.getfixturevalue("setup" if request.param == "absolute" else "relative_setup")


def library_translations(setup, sentences):
    """What t2t-decoder's code gives: decode_batch on the vocabulary's ids (+ EOS), then Vocabulary.decode.

    Inputs longer than max_input_length ids (EOS included) are cut as the export documents.
    """
    vocab, keep = setup["vocab"], DECODE["max_input_length"] - 1
    batch = padded([vocab.encode(sentence)[:keep] + [beam_search.EOS_ID] for sentence in sentences])
    ids, scores = batch_decoding.decode_batch(
        setup["model"],
        batch,
        SearchSettings(beam_size=DECODE["beam_size"], alpha=DECODE["alpha"], extra_length=DECODE["extra_length"]),
    )
    return [vocab.decode(row) for row in ids], scores, ids


# Runs in a fresh interpreter where the project cannot be imported, from a temporary cwd.
SERVING_CLIENT = r"""
import json, sys
sys.modules["t2t_lite"] = None  # the export must not need this project
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops, as TF Serving links them)

export_dir, requests_path = sys.argv[1:]
with open(requests_path) as file:
    requests = json.load(file)
try:
    import t2t_lite  # noqa: F401
    project_importable = True
except ImportError:
    project_importable = False

loaded = tf.saved_model.load(export_dir)
translate = loaded.signatures["serving_default"]
results = []
for batch in requests["text"]:
    out = translate(inputs=tf.constant(batch, tf.string))
    results.append({"outputs": [text.decode("utf-8") for text in out["outputs"].numpy()],
                    "scores": out["scores"].numpy().tolist(),
                    "input_truncated": out["input_truncated"].numpy().tolist()})
ids_out = loaded.signatures["translate_ids"](inputs=tf.constant(requests["ids"], tf.int32))

# TF Serving's C++ loader: restore the variables and run the init op in a session, then feed the
# signature's tensors by name (the graph-mode loader below does the same steps).
graph = tf.Graph()
with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
    meta_graph = tf.compat.v1.saved_model.load(session, ["serve"], export_dir)
    signature = meta_graph.signature_def["serving_default"]
    fetches = {name: info.name for name, info in signature.outputs.items()}
    session_out = session.run(fetches, {signature.inputs["inputs"].name: requests["text"][0]})

print(json.dumps({
    "project_importable": project_importable,
    "text": results,
    "ids": {"outputs": ids_out["outputs"].numpy().tolist(), "scores": ids_out["scores"].numpy().tolist(),
            "input_truncated": ids_out["input_truncated"].numpy().tolist()},
    "session": {"outputs": [text.decode("utf-8") for text in session_out["outputs"]],
                "scores": session_out["scores"].tolist()},
}))
"""


def long_sentence():
    return " ".join(WORDS[:14])  # well over max_input_length subwords


@pytest.fixture(scope="module")
def served(setup, tmp_path_factory):
    """The fresh process' answers to a mixed batch, a batch of 1, a batch of 64 and an ids batch."""
    mixed = ["die katze läuft", "", "  grün \t grün\u00a0haus\n", long_sentence(), "Ω hund ☃", "the dog runs"]
    requests = {
        "text": [mixed, ["der hund"], random_sentences(seed=2, count=64)],
        # One row with its EOS, one without: the ids signature takes both.
        "ids": padded([setup["vocab"].encode("die katze läuft") + [1], setup["vocab"].encode("der hund")]).tolist(),
    }
    requests_path = tmp_path_factory.mktemp("served") / "requests.json"
    requests_path.write_text(json.dumps(requests))
    cwd = tmp_path_factory.mktemp("client_cwd")
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    process = subprocess.run(
        [sys.executable, "-c", SERVING_CLIENT, setup["version_dir"], str(requests_path)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return requests, json.loads(process.stdout.strip().splitlines()[-1])


def test_fresh_process_without_the_project_translates_as_the_library(served, setup):
    requests, answers = served
    assert answers["project_importable"] is False
    for batch, answer in zip(requests["text"], answers["text"]):
        expected, scores, _ = library_translations(setup, batch)
        assert answer["outputs"] == expected
        np.testing.assert_allclose(answer["scores"], scores, rtol=1e-5)
    mixed = answers["text"][0]["outputs"]
    assert mixed[1] == library_translations(setup, [""])[0][0]  # the empty string decodes like [EOS]
    assert len(set(mixed)) >= 4, mixed  # the trained model's translations depend on the input


def test_long_input_is_truncated_to_max_input_length(served, setup):
    requests, answers = served
    vocab, keep = setup["vocab"], DECODE["max_input_length"] - 1
    assert len(vocab.encode(long_sentence())) > keep
    truncated = vocab.decode(vocab.encode(long_sentence())[:keep])
    assert answers["text"][0]["outputs"][3] == library_translations(setup, [truncated])[0][0]
    # The client is told which inputs were cut: only the long sentence of the mixed batch.
    assert answers["text"][0]["input_truncated"] == [index == 3 for index in range(6)]
    assert not any(answers["text"][1]["input_truncated"] + answers["ids"]["input_truncated"])


def test_word_reversal_and_eos_survive_export(served, setup):
    """The trained model reverses short sentences; its EOS ends the text, the limit ends others."""
    _, answers = served
    sentences = random_sentences(seed=2, count=64)
    outputs = answers["text"][2]["outputs"]
    reversed_correctly = sum(out == " ".join(reversed(s.split())) for s, out in zip(sentences, outputs))
    assert reversed_correctly >= 16, list(zip(sentences, outputs))[:8]
    _, _, ids = library_translations(setup, sentences)
    assert (ids == beam_search.EOS_ID).any(axis=1).any() and not (ids == beam_search.EOS_ID).any(axis=1).all()


def test_ids_signature_and_graph_mode_session(served, setup):
    requests, answers = served
    # Ids with or without a final EOS, 0-padded: the same as the library on ids + EOS.
    _, scores, ids = library_translations(setup, ["die katze läuft", "der hund"])
    np.testing.assert_array_equal(answers["ids"]["outputs"], ids)
    np.testing.assert_allclose(answers["ids"]["scores"], scores, rtol=1e-5)
    # TF Serving's loading path (session + restore op) sees the checkpoint's weights too.
    assert answers["session"]["outputs"] == answers["text"][0]["outputs"]
    np.testing.assert_allclose(answers["session"]["scores"], answers["text"][0]["scores"], rtol=1e-5)


def test_saved_model_cli_lists_both_signatures(setup):
    # TensorFlow's own CLI, its console script run by a forked Python (tests/forkserver.py): the same code as
    # `saved_model_cli`, without a fresh process' import of TensorFlow.
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    process = forkserver.run(
        [sys.executable, cli, "show", "--all", "--dir", setup["version_dir"]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    text = " ".join(process.stdout.split())
    # Inputs are declared of any rank and checked in the graph (test_an_input_of_another_rank_is_refused).
    for signature, input_type, input_shape, output_type in (
        ("serving_default", "DT_STRING", "unknown_rank", "DT_STRING"),
        ("translate_ids", "DT_INT32", "unknown_rank", "DT_INT32"),
    ):
        section = text.split(f"signature_def['{signature}']")[1].split("signature_def[")[0]
        assert f"inputs['inputs'] tensor_info: dtype: {input_type} shape: {input_shape}" in section
        assert f"outputs['outputs'] tensor_info: dtype: {output_type}" in section
        assert "outputs['scores'] tensor_info: dtype: DT_FLOAT shape: (-1)" in section
        assert "outputs['input_truncated'] tensor_info: dtype: DT_BOOL shape: (-1)" in section
    assert "outputs['input_not_utf8'] tensor_info: dtype: DT_BOOL shape: (-1)" in text
    section = text.split("signature_def['score']")[1].split("signature_def[")[0]
    for name in ("inputs", "targets"):
        assert f"inputs['{name}'] tensor_info: dtype: DT_STRING shape: unknown_rank" in section
    assert "outputs['scores'] tensor_info: dtype: DT_FLOAT shape: (-1)" in section
    assert "outputs['token_scores'] tensor_info: dtype: DT_FLOAT shape: (-1, -1)" in section


def test_layout_assets_and_variables(setup, loaded_version):
    version_dir = setup["version_dir"]
    assert sorted(os.listdir(os.path.dirname(version_dir))) == [str(STEP)]  # no staging left behind
    assert sorted(os.listdir(os.path.join(version_dir, "assets"))) == ["t2t_export.json", "vocab.translate_files.model"]
    assert os.listdir(os.path.join(version_dir, "assets.extra")) == ["tf_serving_warmup_requests"]
    with open(os.path.join(version_dir, "assets", "vocab.translate_files.model"), "rb") as file:
        assert file.read() == setup["vocab"].model_proto
    with open(os.path.join(version_dir, "assets", export.EXPORT_CONFIG_FILE)) as file:
        config = json.load(file)
    assert config["problem"] == "translate_files" and config["step"] == STEP
    sampling = {"sampling_method": "argmax", "sampling_temp": 1.0, "sampling_keep_top_k": -1, "sampling_seed": 1}
    alignment = {"write_alignment": False, "alignment_layer": -1, "alignment_heads": 0}  # off, as exported
    assert config["decode_hparams"] == {**DECODE, "xla": False, "quantize": "", **sampling, **alignment}
    assert config["xla_buckets"] is None
    assert config["hparams"] == json.loads(setup["hparams"].to_json())
    loaded = loaded_version(version_dir)
    assert sorted(config["signatures"]) == sorted(loaded.signatures)
    for name, signature in config["signatures"].items():  # the record lists every input and output the graph has
        function = loaded.signatures[name]
        assert sorted(signature) == sorted(
            list(function.structured_input_signature[1]) + list(function.structured_outputs)
        )
    # The variables are exactly the model's weights as restored from the checkpoint: no optimizer
    # slots, no dropout seeds, nothing initialised afresh.
    reader = tf.train.load_checkpoint(os.path.join(version_dir, "variables", "variables"))
    names = [name for name in reader.get_variable_to_shape_map() if name.startswith("model_weights/")]
    assert len(names) == len(reader.get_variable_to_shape_map()) - 1  # minus the object graph
    weights = setup["model"].weights
    assert len(names) == len(weights)
    for index, weight in enumerate(weights):
        np.testing.assert_array_equal(
            reader.get_tensor(f"model_weights/{index}/.ATTRIBUTES/VARIABLE_VALUE"), weight.numpy()
        )
    # The graph of five signatures (three of them a whole search) without the weights: a few MB at most.
    assert os.path.getsize(os.path.join(version_dir, "saved_model.pb")) < 3_000_000


def function_library(version_dir):
    """name -> FunctionDef of every function in an export's graph, read from saved_model.pb."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(version_dir, "saved_model.pb"), "rb") as file:
        saved.ParseFromString(file.read())
    return {function.signature.name: function for function in saved.meta_graphs[0].graph_def.library.function}


def test_text_and_ids_signatures_share_one_traced_search(setup):
    """serving_default and translate_ids call one beam search function; translate_prefix and sample have
    their own (forced prefixes, sampling): three searches' loop bodies in the export, not four."""
    library = function_library(setup["version_dir"])

    def called(name):  # the functions a function's graph calls, directly or through the ones it calls
        found = set()
        for node in library[name].node_def:
            for value in node.attr.values():
                if value.func.name in library and value.func.name not in found:
                    found |= {value.func.name} | called(value.func.name)
        return found

    def searches(name):
        return {callee for callee in called(name) if callee.startswith("__inference_search_")}

    translate, translate_ids = (
        next(name for name in library if re.fullmatch(rf"__inference_{signature}_\d+", name))
        for signature in ("translate", "translate_ids")
    )
    assert len(searches(translate)) == 1 and searches(translate) == searches(translate_ids)
    assert sum("while_body" in name for name in library) == 3


@pytest.fixture(scope="module")
def xla_version_dir(setup, built_once):
    """The same checkpoint exported by `t2t-exporter --decode_hparams=...,xla=true` (once per test run)."""
    root = built_once("trained_export_xla", lambda path: export_again(setup, str(path / "export"), xla="true"))
    return os.path.join(root, "export", str(STEP))


@pytest.fixture(scope="module")
def xla_loaded(xla_version_dir):
    """The XLA export loaded once per module, so each bucket is compiled once per process."""
    return tf.saved_model.load(xla_version_dir)


@pytest.fixture(scope="module", params=["plain", "xla"])
def loaded_export(request, setup, loaded_version):
    return loaded_version(setup["version_dir"]) if request.param == "plain" else request.getfixturevalue("xla_loaded")


def test_xla_export_holds_one_compiled_search_per_length_bucket(xla_version_dir):
    """The search is traced with each length bucket and the batch left unknown; XLA compiles it for each batch
    bucket when it is called: one XLA function per length in the graph, not one per bucket shape (six here)."""
    library = function_library(xla_version_dir)
    compiled = [name for name, function in library.items() if function.attr["_XlaMustCompile"].b]
    assert len(compiled) == len(xla_buckets.length_buckets(DECODE["max_input_length"])) == 1


def test_xla_export_records_its_buckets(xla_version_dir):
    with open(os.path.join(xla_version_dir, "assets", export.EXPORT_CONFIG_FILE)) as file:
        assert json.load(file)["xla_buckets"] == {"length": [16], "batch": [1, 4, 8]}


XLA_SENTENCES = random_sentences(seed=3, count=70, max_words=4)


@pytest.mark.parametrize("count", [1, 3, 5, 8, 9, 70])
def test_xla_export_translates_as_t2t_decoder_xla(xla_loaded, setup, count):
    """Same strings as t2t-decoder --decode_hparams=xla=true, in every batch bucket and over max_batch_size
    sentences (decoded in chunks: 8 + 1, and 8 × 8 + 6)."""
    decoder = decode_settings.DecodeHParams.of(
        beam_size=DECODE["beam_size"], alpha=DECODE["alpha"], extra_length=DECODE["extra_length"], xla=True
    )
    sentences = XLA_SENTENCES[:count]
    outputs = xla_loaded.signatures["serving_default"](inputs=tf.constant(sentences))
    expected = translation.translate(setup["model"], setup["vocab"], sentences, decoder, progress=False)
    assert [text.decode("utf-8") for text in outputs["outputs"].numpy()] == [t.hypotheses[0] for t in expected]
    np.testing.assert_allclose(outputs["scores"].numpy(), [t.scores[0] for t in expected], rtol=1e-5)


def test_xla_export_ids_signature_gives_decode_batch_xla_ids(xla_loaded, setup):
    batch = padded([setup["vocab"].encode(sentence) + [beam_search.EOS_ID] for sentence in XLA_SENTENCES[:70]])
    ids, _ = batch_decoding.decode_batch(
        setup["model"],
        batch,
        SearchSettings(
            beam_size=DECODE["beam_size"], alpha=DECODE["alpha"], extra_length=DECODE["extra_length"], xla=True
        ),
    )
    served = xla_loaded.signatures["translate_ids"](inputs=tf.constant(batch))["outputs"].numpy()
    # Both are 0-padded after EOS; only the width of that padding may differ.
    width = max(served.shape[1], ids.shape[1])
    np.testing.assert_array_equal(
        np.pad(served, [[0, 0], [0, width - served.shape[1]]]), np.pad(ids, [[0, 0], [0, width - ids.shape[1]]])
    )
    assert served[:, -1].any()  # no all-padding column is returned


def test_a_relative_export_translates_as_the_library(relative_setup, loaded_version):
    """Relative positions (transformer_relative_tiny): the text and ids signatures give decode_batch's outputs."""
    loaded = loaded_version(relative_setup["version_dir"])
    sentences = random_sentences(seed=2, count=16) + [long_sentence(), ""]
    texts, scores, ids = library_translations(relative_setup, sentences)
    served = loaded.signatures["serving_default"](inputs=tf.constant(sentences))
    assert [text.decode("utf-8") for text in served["outputs"].numpy()] == texts
    np.testing.assert_allclose(served["scores"].numpy(), scores, rtol=1e-5)
    vocab, keep = relative_setup["vocab"], DECODE["max_input_length"] - 1
    batch = padded([vocab.encode(sentence)[:keep] + [beam_search.EOS_ID] for sentence in sentences])
    served_ids = loaded.signatures["translate_ids"](inputs=tf.constant(batch))["outputs"].numpy()
    np.testing.assert_array_equal(served_ids[:, : ids.shape[1]], ids)
    assert sum(text == " ".join(reversed(s.split())) for text, s in zip(texts, sentences)) >= 4  # it learned


def test_a_relative_xla_export_translates_as_t2t_decoder_xla(relative_setup, built_once):
    """Its XLA buckets (one length, batches 1, 4, 8) give t2t-decoder's xla=true strings and scores."""
    root = built_once(
        "trained_export_relative_xla", lambda path: export_again(relative_setup, str(path / "export"), xla="true")
    )
    loaded = tf.saved_model.load(os.path.join(root, "export", str(STEP)))
    decoder = decode_settings.DecodeHParams.of(
        beam_size=DECODE["beam_size"], alpha=DECODE["alpha"], extra_length=DECODE["extra_length"], xla=True
    )
    sentences = XLA_SENTENCES[:5]  # batch bucket 8
    outputs = loaded.signatures["serving_default"](inputs=tf.constant(sentences))
    expected = translation.translate(
        relative_setup["model"], relative_setup["vocab"], sentences, decoder, progress=False
    )
    assert [text.decode("utf-8") for text in outputs["outputs"].numpy()] == [t.hypotheses[0] for t in expected]
    np.testing.assert_allclose(outputs["scores"].numpy(), [t.scores[0] for t in expected], rtol=1e-5)


def test_empty_batch_returns_an_empty_batch(loaded_export):
    text = loaded_export.signatures["serving_default"](inputs=tf.constant([], tf.string))
    assert {name: value.shape[0] for name, value in text.items()} == dict.fromkeys(text, 0)
    for width in (0, 5):
        ids = loaded_export.signatures["translate_ids"](inputs=tf.zeros([0, width], tf.int32))
        assert {name: value.shape[0] for name, value in ids.items()} == dict.fromkeys(ids, 0)


TEXT_RANK = r"expected string \[batch\], one sentence per element; got shape\] \[{}\]"


@pytest.mark.parametrize(
    "signature, inputs, expected",
    [
        ("serving_default", {"inputs": [["die katze"], ["der hund"]]}, "inputs: " + TEXT_RANK.format("2 1")),
        ("serving_default", {"inputs": "die katze"}, "inputs: " + TEXT_RANK.format("")),
        ("sample", {"inputs": [["die katze"]]}, "inputs: " + TEXT_RANK.format("1 1")),
        ("score", {"inputs": ["die katze"], "targets": [["katze die"]]}, "targets: " + TEXT_RANK.format("1 1")),
        ("translate_prefix", {"inputs": [["die katze"]], "prefixes": [""]}, "inputs: " + TEXT_RANK.format("1 1")),
        ("translate_ids", {"inputs": [3, 4, 1]}, r"expected int32 \[batch, length\], .*got shape\] \[3\]"),
        ("translate_ids", {"inputs": [[[3, 4, 1]]]}, r"expected int32 \[batch, length\], .*got shape\] \[1 1 3\]"),
    ],
    ids=["text-2", "text-0", "sample-2", "score-2", "prefix-2", "ids-1", "ids-3"],
)
def test_an_input_of_another_rank_is_refused(loaded_export, signature, inputs, expected):
    """Declared [batch], such an input went through (TF Serving does not check a declared shape) and gave
    outputs of mixed ranks; the signatures check the rank in the graph and name the input."""
    tensors = {
        name: tf.constant(value, tf.int32 if signature == "translate_ids" else tf.string)
        for name, value in inputs.items()
    }
    with pytest.raises(tf.errors.InvalidArgumentError, match=expected):
        loaded_export.signatures[signature](**tensors)


@pytest.mark.parametrize("signature, paired", [("score", "targets"), ("translate_prefix", "prefixes")])
def test_a_second_input_of_another_count_is_refused_naming_both(setup, loaded_version, signature, paired):
    loaded = loaded_version(setup["version_dir"])
    expected = rf"inputs and {paired}: expected one of {paired} per input; got\] \[2\] \[inputs and\] \[1\]"
    with pytest.raises(tf.errors.InvalidArgumentError, match=expected):
        loaded.signatures[signature](inputs=tf.constant(["die katze", "der hund"]), **{paired: tf.constant(["katze"])})


def test_tf_servings_path_refuses_another_rank_too(setup):
    """A session fed by tensor name, as TF Serving's C++ loader runs the graph: no shape check before the graph's."""
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
        signature = tf.compat.v1.saved_model.load(session, ["serve"], setup["version_dir"]).signature_def[
            "serving_default"
        ]
        fetch = signature.outputs["outputs"].name
        assert len(session.run(fetch, {signature.inputs["inputs"].name: ["der hund", "die katze"]})) == 2
        with pytest.raises(tf.errors.InvalidArgumentError, match="inputs: " + TEXT_RANK.format("2 1")):
            session.run(fetch, {signature.inputs["inputs"].name: [["der hund"], ["die katze"]]})


def is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def test_bytes_that_are_not_utf8_are_flagged_and_spare_the_batch(loaded_export):
    translate = loaded_export.signatures["serving_default"]
    # Stray continuation byte, truncated sequence, overlong "/", UTF-16 surrogate, and valid text around them.
    batch = [
        "die katze läuft".encode(),
        b"\xff\xfe hund",
        b"caf\xc3",
        "der hund".encode(),
        b"\xc0\xaf",
        b"\xed\xa0\x80",
        "grün ☃".encode(),
    ]
    valid = [is_utf8(raw) for raw in batch]  # Python's own decoder is the reference
    out = translate(inputs=tf.constant(batch))
    assert out["input_not_utf8"].numpy().tolist() == [not ok for ok in valid]
    alone = translate(inputs=tf.constant([raw for raw, ok in zip(batch, valid) if ok]))
    assert out["outputs"].numpy()[valid].tolist() == alone["outputs"].numpy().tolist()
    np.testing.assert_allclose(out["scores"].numpy()[valid], alone["scores"].numpy(), rtol=1e-5)
    invalid = ~np.array(valid)
    assert set(out["outputs"].numpy()[invalid]) == {b""} and np.all(out["scores"].numpy()[invalid] == -np.inf)


def test_existing_version_is_never_overwritten(setup):
    saved_model = os.path.join(setup["version_dir"], "saved_model.pb")
    before = os.stat(saved_model).st_mtime_ns
    with pytest.raises(t2t_exporter.flags.UsageError, match=f"{STEP} already exists.*never overwritten.*--export_dir"):
        run_exporter(setup["flags"])
    assert os.stat(saved_model).st_mtime_ns == before


def test_exporter_flag_errors(setup, tmp_path):
    with pytest.raises(t2t_exporter.flags.UsageError, match="--export_dir"):
        run_exporter([flag for flag in setup["flags"] if not flag.startswith("--export_dir")])
    with pytest.raises(t2t_exporter.flags.UsageError, match="not a SentencePiece model"):
        run_exporter(
            ["--problem=algorithmic_reverse", f"--export_dir={tmp_path}"] + setup["flags"][1:3] + setup["flags"][4:6]
        )
    with pytest.raises(t2t_exporter.flags.UsageError, match="--decode_hparams: .*max_input_leng"):
        run_exporter(setup["flags"][:-1] + ["--decode_hparams=max_input_lenght=5", f"--export_dir={tmp_path}"])
    with pytest.raises(t2t_exporter.flags.UsageError, match="--hparams: Unknown hparam 'hidden_sise'"):
        run_exporter(setup["flags"] + ["--hparams=hidden_sise=3", f"--export_dir={tmp_path}"])
    with pytest.raises(t2t_exporter.flags.UsageError, match="--model: .*transformr"):
        run_exporter(setup["flags"] + ["--model=transformr", f"--export_dir={tmp_path}"])
    size = setup["vocab"].vocab_size  # the `sample` signature's top-k, checked before the checkpoint is read
    with pytest.raises(
        t2t_exporter.flags.UsageError, match=f"sampling_keep_top_k={size + 1} is more than the model's {size} tokens"
    ):
        run_exporter(setup["flags"][:-1] + [decode_flag(sampling_keep_top_k=size + 1), f"--export_dir={tmp_path}"])
    assert os.listdir(tmp_path) == []


def test_export_hparams_follow_the_decoder_precedence():
    base, files = registry.hparams("transformer_base"), registry.problem("translate_files")
    assert export_settings(base, files) == ExportSettings.of(
        beam_size=4, alpha=0.6, extra_length=50, max_input_length=256, xla=False
    )
    assert export_settings(base, files, "xla=true").search.xla
    parsing = registry.problem("parsing_wsj")
    assert export_settings(base, parsing, "max_input_length=100") == ExportSettings.of(
        beam_size=21, alpha=0.3, extra_length=300, max_input_length=100
    )
    with pytest.raises(HParamsError, match="beam_size"):
        export_settings(base, files, "beam_sise=2")
    with pytest.raises(ValueError, match="max_input_length"):
        export_settings(base, files, "max_input_length=0")
    assert export_settings(base, files).max_batch_size == 64  # as the docs' batching.pbtxt
    with pytest.raises(ValueError, match="max_batch_size must be ≥ 1"):
        export_settings(base, files, "max_batch_size=0")


def test_the_prefix_signature_continues_each_prefix_as_the_decoder_does(either_setup, loaded_version):
    setup = either_setup
    loaded = loaded_version(setup["version_dir"])
    sentences = random_sentences(seed=21, count=4)
    prefixes = [sentences[0].split()[-1], "", " ".join(sentences[2].split()[-2:]), ""]
    served = loaded.signatures["translate_prefix"](inputs=tf.constant(sentences), prefixes=tf.constant(prefixes))
    settings = decode_settings.DecodeHParams.of(beam_size=3, alpha=0.6, extra_length=4)
    expected = translation.translate(
        setup["model"], setup["vocab"], sentences, settings, progress=False, prefixes=prefixes
    )
    assert [text.decode() for text in served["outputs"].numpy()] == [t.hypotheses[0] for t in expected]
    np.testing.assert_allclose(served["scores"].numpy(), [t.scores[0] for t in expected], rtol=1e-4)
    assert served["outputs"].numpy()[0].decode().startswith(prefixes[0])


def test_the_sample_signature_draws_as_the_decoder_samples_with_the_exports_settings(either_setup, loaded_version):
    setup = either_setup
    loaded = loaded_version(setup["version_dir"])
    settings = decode_settings.DecodeHParams.of(alpha=0.6, extra_length=4, sampling_method="random", sampling_seed=1)
    for sentence in random_sentences(seed=22, count=3):  # one a batch: a draw depends on the row it is in
        served = loaded.signatures["sample"](inputs=tf.constant([sentence]))
        expected = translation.translate(setup["model"], setup["vocab"], [sentence], settings, progress=False)[0]
        assert served["outputs"].numpy()[0].decode() == expected.hypotheses[0]
        assert served["scores"].numpy()[0] == pytest.approx(expected.scores[0], rel=1e-4)


def test_in_graph_normalization_equals_python_str_split():
    spaces = [chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace()]
    texts = [
        "",
        " ",
        "a",
        f"{''.join(spaces)}x{spaces[3]}{spaces[-1]}y  z{spaces[-5]}",
        "grün\u00a0\u3000haus\t",
        "\u200b zero-width space is not whitespace",
        "a\u2028b\u0085c\u001fd",
    ]
    got = vocabulary.normalize_text_in_graph(tf.constant(texts)).numpy()
    assert [text.decode("utf-8") for text in got] == [vocabulary.normalize_text(text) for text in texts]


QUANTIZED = {"int8": tf.int8, "bfloat16": tf.bfloat16}


@pytest.fixture(scope="module", params=sorted(QUANTIZED))
def quantized_version_dir(request, setup, built_once):
    """`--decode_hparams=quantize=<mode>,xla=true`: (mode, the version directory of the checkpoint exported so),
    exported once per test run and mode."""
    mode = request.param
    root = built_once(
        f"trained_export_{mode}", lambda path: export_again(setup, str(path / "export"), quantize=mode, xla="true")
    )
    return mode, os.path.join(root, "export", str(STEP))


@pytest.fixture(scope="module")
def quantized(quantized_version_dir):
    """(mode, version directory, the export loaded): loaded once per module and mode, by the tests that call it
    (loading an int8 XLA export takes seconds)."""
    mode, version_dir = quantized_version_dir
    return mode, version_dir, tf.saved_model.load(version_dir)


def test_a_quantized_export_holds_that_modes_weights(quantized_version_dir):
    """`--decode_hparams=quantize=int8` (or bfloat16): those weights in the SavedModel, float32 for the rest."""
    mode, version_dir = quantized_version_dir
    with open(os.path.join(version_dir, "assets", export.EXPORT_CONFIG_FILE)) as file:
        assert json.load(file)["decode_hparams"]["quantize"] == mode
    reader = tf.train.load_checkpoint(os.path.join(version_dir, "variables", "variables"))
    dtypes = [dtype for name, dtype in reader.get_variable_to_dtype_map().items() if name.startswith("model_weights/")]
    # One encoder layer (4 attention projections, 2 FFN), one decoder layer (4 + 4 + 2), the shared embedding.
    assert dtypes.count(QUANTIZED[mode]) == 6 + 10 + 1
    assert tf.float32 in dtypes  # biases, layer normalization


def quantized_test_batch(setup):
    """The 64 sentences the quantized exports are checked on, and their ids (cut, + EOS, 0-padded)."""
    sentences = random_sentences(seed=2, count=64)
    vocab, keep = setup["vocab"], DECODE["max_input_length"] - 1
    return sentences, padded([vocab.encode(sentence)[:keep] + [beam_search.EOS_ID] for sentence in sentences])


def test_a_quantized_export_decodes_as_the_quantized_library(quantized, setup):
    """The same ids as decode_batch on the model converted by the library."""
    mode, _, loaded = quantized
    converted = model_loading.load_model_for_decoding(
        registry.problem("translate_files"),
        setup["hparams"],
        str(setup["root"] / "data"),
        str(setup["root"] / "train"),
        quantize=mode,
    )
    _, batch = quantized_test_batch(setup)
    # XLA on both sides: bfloat16 rounds each activation, so another compiler's order of float32 sums moves a
    # score by up to 6e-3 relative with TensorFlow's Eigen kernels (those of a CPU without AVX-512 VNNI/BF16 or
    # AMX; measured with TF_ENABLE_ONEDNN_OPTS=0) against 4e-5 with oneDNN's: enough to swap two close beams.
    ids, _ = batch_decoding.decode_batch(
        converted,
        batch,
        SearchSettings(
            beam_size=DECODE["beam_size"], alpha=DECODE["alpha"], extra_length=DECODE["extra_length"], xla=True
        ),
    )
    outputs = loaded.signatures[export.IDS_SIGNATURE](inputs=tf.constant(batch))["outputs"].numpy()
    np.testing.assert_array_equal(outputs[:, : ids.shape[1]], ids)


def test_a_quantized_export_keeps_the_trained_translations(quantized, setup):
    """The trained model's translations (word reversal) almost all unchanged by the lower precision."""
    _, _, loaded = quantized
    sentences, _ = quantized_test_batch(setup)
    texts = [
        text.decode()
        for text in loaded.signatures[export.TEXT_SIGNATURE](inputs=tf.constant(sentences))["outputs"].numpy()
    ]
    float32_texts = library_translations(setup, sentences)[0]
    assert sum(a == b for a, b in zip(texts, float32_texts)) >= 0.9 * len(sentences), list(zip(texts, float32_texts))[
        :8
    ]


def test_an_export_with_write_alignment_returns_the_decoders_links_beside_each_translation(
    relative_setup, loaded_version
):
    """The relative export, written with write_alignment=true (RELATIVE_DECODE)."""
    setup, aligning_export = relative_setup, loaded_version(relative_setup["version_dir"])
    sentences = random_sentences(seed=23, count=6) + ["", long_sentence()]
    served = aligning_export.signatures["serving_default"](inputs=tf.constant(sentences + [b"\xff bad"]))
    settings = decode_settings.DecodeHParams.of(
        beam_size=3, alpha=0.6, extra_length=4, max_input_size=DECODE["max_input_length"], write_alignment=True
    )
    expected = translation.translate(setup["model"], setup["vocab"], sentences, settings, progress=False)
    assert [text.decode() for text in served["outputs"].numpy()[:-1]] == [t.hypotheses[0] for t in expected]
    assert [links.decode() for links in served["alignments"].numpy()] == [t.alignments[0] for t in expected] + [""]
    assert expected[0].alignments[0] and expected[-2].alignments[0] == ""  # links, and none for the empty line
    pairs = [(sentence, " ".join(reversed(sentence.split()))) for sentence in sentences[:4]]
    scored = aligning_export.signatures["score"](
        inputs=tf.constant([source for source, _ in pairs]), targets=tf.constant([target for _, target in pairs])
    )
    given = scoring.score_pairs(setup["model"], setup["vocab"], pairs, settings)
    assert [links.decode() for links in scored["alignments"].numpy()] == [score.alignment for score in given]


def test_an_export_without_write_alignment_has_no_alignments_output(setup, loaded_version):
    loaded = loaded_version(setup["version_dir"])
    assert "alignments" not in loaded.signatures["serving_default"].structured_outputs


def test_a_saved_model_export_on_a_full_disk_stops_naming_the_version_leaves_nothing_and_reruns(setup, small_disk):
    export_dir = str(small_disk / "export")
    full_disk.fill(small_disk, leave=64 * 1024)
    with pytest.raises(Exception) as error:
        export_again(setup, export_dir)
    message = tool_process.disk_full_message(error.value)
    assert message is not None, error.value
    assert message.startswith(f"the disk holding {small_disk} is full")  # the exporter created --export_dir
    assert f"could not write {export_dir}/{STEP}/" in message  # a file of the version, not of its staging
    assert os.listdir(small_disk) == ["filler"]  # no staging directory, no version, no --export_dir
    os.remove(small_disk / "filler")  # space freed: the same export runs to its end
    export_again(setup, export_dir)
    assert os.listdir(export_dir) == [str(STEP)]
    assert "serving_default" in tf.saved_model.load(os.path.join(export_dir, str(STEP))).signatures
