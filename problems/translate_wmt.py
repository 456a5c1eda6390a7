"""WMT 2014 English->German and English->French (§5.1, §6.1) through tensorflow-datasets.

§5.1: "the standard WMT 2014 English-German dataset consisting of about 4.5 million
sentence pairs ... byte-pair encoding, which has a shared source-target vocabulary
of about 37000 tokens"; English-French: "36M sentences ... 32000 word-piece
vocabulary". §6.1 selects on newstest2013 and reports newstest2014, so:

    train = tfds "train", dev = newstest2013 (tfds "validation"), test = newstest2014 (tfds "test")

The tfds configs `wmt14_translate/de-en` and `.../fr-en` yield {"de"/"fr": ..., "en": ...}
whichever way round they are named; we read English as the source.
tfds keeps its downloads and prepared files under `<tmp_dir>/tensorflow_datasets`;
files that tfds cannot download itself go in `<tmp_dir>/manual` (its manual_dir).
No raw-file record is kept (`raw_files` stays empty, see `t2t_lite.data.raw_fingerprint`):
tfds checks each download against the size and SHA-256 it registers for the URL, and
the WMT14 release does not change.
The vocabulary is trained on a shuffled sample of `max_vocab_sentences` sentences.
"""

import os

from t2t_lite.problem import TextProblem
from t2t_lite.registry import register_problem

TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


class TranslateWmt14(TextProblem):
    """English -> `target_language` from tfds `wmt14_translate/<target_language>-en`."""

    target_language = ""

    @property
    def tfds_name(self) -> str:
        return f"wmt14_translate/{self.target_language}-en"

    def decode_defaults(self) -> dict:
        return {"beam_size": 4, "alpha": 0.6, "extra_length": 50}  # §6.1

    def text_pairs(self, tmp_dir: str, split: str):
        import tensorflow_datasets as tfds  # here: a quarter second that every tool would pay at start-up

        tfds_dir = os.path.join(tmp_dir, "tensorflow_datasets")
        builder = tfds.builder(self.tfds_name, data_dir=tfds_dir)
        builder.download_and_prepare(
            download_dir=os.path.join(tfds_dir, "downloads"),
            download_config=tfds.download.DownloadConfig(manual_dir=os.path.join(tmp_dir, "manual")),
        )
        examples = builder.as_dataset(split=TFDS_SPLITS[split], shuffle_files=False)
        return _EnglishFirst(examples, self.target_language)


class _EnglishFirst:
    """(English, other) string pairs of a tfds translation split; iterable more than once."""

    def __init__(self, examples, target_language: str):
        self.examples = examples
        self.target_language = target_language

    def __iter__(self):
        for example in self.examples.as_numpy_iterator():
            yield example["en"].decode("utf-8"), example[self.target_language].decode("utf-8")

    def __length_hint__(self):
        """The split's size, which tfds records, for datagen's progress (`datagen.with_progress`)."""
        count = int(self.examples.cardinality())
        return count if count >= 0 else NotImplemented


@register_problem
class TranslateEnde(TranslateWmt14):
    """WMT14 English -> German with a shared 37,000-piece BPE vocabulary (§5.1)."""

    target_language = "de"
    approx_vocab_size = 37000
    num_shards = {"train": 100, "dev": 1, "test": 1}


@register_problem
class TranslateEnfr(TranslateWmt14):
    """WMT14 English -> French with a shared 32,000-piece vocabulary (§5.1)."""

    target_language = "fr"
    approx_vocab_size = 32000
    num_shards = {"train": 100, "dev": 1, "test": 1}
