"""Model directories and exports written by earlier code still load, and decode as the current code does.

tests/fixtures/written_before_regroup/ holds what the code wrote before t2t_lite/ was regrouped
into subpackages: a tiny word-reversal model's training checkpoint (ckpt-150, with its optimizer
state, hparams.json and problem.json), its SentencePiece vocabulary, and its `t2t-exporter`
SavedModel (beam 3, α 0.6). A user's trained runs and served models are files like these; moving
or renaming code must never strand them.
"""

import json
import pathlib

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the export's graph uses)

from t2t_lite import registry
from t2t_lite.decode import batch_decoding, beam_search, model_loading
from t2t_lite.decode.search_settings import SearchSettings
from t2t_lite.run_dir import model_info

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "written_before_regroup"
SENTENCES = ["die katze läuft", "der hund", "grün haus straße", "the cat runs quickly", ""]


def restored_model():
    model_dir = str(FIXTURE / "train")
    info = model_info.read_problem_info(model_dir)
    problem = registry.problem(info["problem"])
    model = model_loading.load_model_for_decoding(
        problem, model_info.read_hparams(model_dir), str(FIXTURE / "data"), model_dir
    )
    return model, problem.vocabulary(str(FIXTURE / "data"))


def test_checkpoint_restores_every_stored_weight_under_its_recorded_settings():
    model, vocabulary = restored_model()
    assert vocabulary.fingerprint == model_info.read_problem_info(str(FIXTURE / "train"))["vocabulary"]
    reader = tf.train.load_checkpoint(str(FIXTURE / "train" / "ckpt-150"))
    stored = {
        int(name.split("/")[2]): name
        for name in reader.get_variable_to_shape_map()
        if name.startswith("model/weights_in_order/") and name.endswith("VARIABLE_VALUE")
    }
    assert sorted(stored) == list(range(len(model.variables)))
    for index, variable in enumerate(model.variables):
        np.testing.assert_array_equal(variable.numpy(), reader.get_tensor(stored[index]), err_msg=variable.path)


def test_export_written_before_translates_as_the_current_decoder():
    model, vocabulary = restored_model()
    version_dir = FIXTURE / "export" / "150"
    settings = json.loads((version_dir / "assets" / "t2t_export.json").read_text())["decode_hparams"]
    served = tf.saved_model.load(str(version_dir)).signatures["serving_default"](inputs=tf.constant(SENTENCES))
    keep = settings["max_input_length"] - 1
    encoded = [vocabulary.encode(sentence)[:keep] + [beam_search.EOS_ID] for sentence in SENTENCES]
    batch = np.zeros((len(encoded), max(map(len, encoded))), np.int32)
    for row, ids in enumerate(encoded):
        batch[row, : len(ids)] = ids
    ids, scores = batch_decoding.decode_batch(
        model,
        batch,
        SearchSettings(beam_size=settings["beam_size"], alpha=settings["alpha"], extra_length=settings["extra_length"]),
    )
    assert [text.decode("utf-8") for text in served["outputs"].numpy()] == [vocabulary.decode(row) for row in ids]
    np.testing.assert_allclose(served["scores"].numpy(), scores, rtol=1e-5)
    assert len({tuple(row) for row in ids.tolist()}) >= 3  # the translations depend on the input
