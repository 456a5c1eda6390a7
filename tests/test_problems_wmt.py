"""translate_ende / translate_enfr through tensorflow-datasets, under tfds.testing.mock_data (no download)."""

import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from t2t_lite import registry
from t2t_lite.data import datagen
from t2t_lite.data.input_pipeline import batched_dataset
from t2t_lite.problems.translate_wmt import TranslateEnde, TranslateEnfr


class TinyEnde(TranslateEnde):
    approx_vocab_size = 400
    num_shards = {"train": 2, "dev": 1, "test": 1}


def test_paper_vocabulary_sizes_and_decoding_defaults():
    assert registry.problem("translate_ende").approx_vocab_size == 37000  # §5.1
    assert registry.problem("translate_enfr").approx_vocab_size == 32000
    assert registry.problem("translate_ende").decode_defaults() == {"beam_size": 4, "alpha": 0.6, "extra_length": 50}
    assert registry.problem("translate_ende").eval_metrics == ["bleu"]


def test_random_mock_data_end_to_end(tmp_path):
    # mock_data fills every split with random strings over " abcdefghij" (runs of spaces included).
    hparams = registry.hparams("transformer_tiny").replace(batch_size=256, max_length=64)
    with tfds.testing.mock_data(num_examples=40):
        report = datagen.generate(TinyEnde(), str(tmp_path / "data"), str(tmp_path / "tmp"))
    assert report.written == {"train": 40, "dev": 40, "test": 40}
    vocabulary = TinyEnde().vocabulary(str(tmp_path / "data"))
    batches = list(batched_dataset(TinyEnde(), "dev", str(tmp_path / "data"), hparams).as_numpy_iterator())
    assert sum(len(batch["inputs"]) for batch in batches) == 40
    for batch in batches:
        for inputs in batch["inputs"]:
            assert set(vocabulary.decode(inputs)) <= set(" abcdefghij")


def english_first_mock(language):
    pairs = {
        "train": [
            ("A house by the lake.", {"de": "Ein Haus am See.", "fr": "Une maison au bord du lac."}),
            ("Good morning!", {"de": "Guten Morgen!", "fr": "Bonjour !"}),
        ],
        "validation": [("Thank you.", {"de": "Danke.", "fr": "Merci."})],
        "test": [("See you soon.", {"de": "Bis bald.", "fr": "À bientôt."})],
    }

    def as_dataset(self, split, **kwargs):
        rows = pairs[split]
        # The tfds config names the pair (de, en) / (fr, en): both keys, English among them.
        return tf.data.Dataset.from_tensor_slices(
            {"en": [english for english, _ in rows], language: [other[language] for _, other in rows]}
        )

    return as_dataset


@pytest.mark.parametrize("problem_class, language", [(TranslateEnde, "de"), (TranslateEnfr, "fr")])
def test_english_is_the_source_and_splits_are_newstest2013_and_2014(problem_class, language):
    problem = problem_class()
    with tfds.testing.mock_data(as_dataset_fn=english_first_mock(language)):
        train = list(problem.text_pairs("/nonexistent-tmp", "train"))
        dev = list(problem.text_pairs("/nonexistent-tmp", "dev"))
        test = list(problem.text_pairs("/nonexistent-tmp", "test"))
    assert train[0][0] == "A house by the lake."
    assert dev == [("Thank you.", {"de": "Danke.", "fr": "Merci."}[language])]  # tfds "validation"
    assert test[0][0] == "See you soon."  # tfds "test" = newstest2014
    assert problem.tfds_name == f"wmt14_translate/{language}-en"


def test_tfds_data_and_manual_downloads_live_in_tmp_dir(monkeypatch, tmp_path):
    calls = {}

    class RecordingBuilder:
        def __init__(self, name, data_dir):
            calls["name"], calls["data_dir"] = name, data_dir

        def download_and_prepare(self, download_dir, download_config):
            calls["download_dir"], calls["manual_dir"] = download_dir, download_config.manual_dir

        def as_dataset(self, split, shuffle_files):
            calls["split"] = split
            return tf.data.Dataset.from_tensor_slices({"de": ["Hallo."], "en": ["Hello."]})

    monkeypatch.setattr(tfds, "builder", RecordingBuilder)
    assert list(TranslateEnde().text_pairs(str(tmp_path), "dev")) == [("Hello.", "Hallo.")]
    assert calls == {
        "name": "wmt14_translate/de-en",
        "data_dir": str(tmp_path / "tensorflow_datasets"),
        "download_dir": str(tmp_path / "tensorflow_datasets" / "downloads"),
        "manual_dir": str(tmp_path / "manual"),
        "split": "validation",
    }
