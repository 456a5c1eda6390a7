"""Problems: a task's raw data, vocabulary, on-disk examples and defaults, as in tensor2tensor.

A `Problem` is what `--problem` names. It knows how to turn raw data into
tensor2tensor's TFRecord files (`generate_data`, run by t2t-datagen), which
vocabulary maps its text to ids (`vocabulary`), how to read the examples back
(`dataset`: a tf.data.Dataset of `{"inputs": int32[len], "targets": int32[len]}`,
each ending in EOS = 1), and the decoding defaults and metrics of its task (§6).
`name_rev` problems (`was_reversed=True`) swap inputs and targets and reuse the
files of the base problem, as tensor2tensor's `_rev` does.

`TextProblem` is the base of every problem whose raw data are sentence pairs:
a subclass only says where its pairs come from (`text_pairs`) and how big its
shared BPE vocabulary is (`approx_vocab_size`, §5.1).
"""

import abc
import collections
import os
import shutil

import tensorflow as tf

from t2t_lite import registry
from t2t_lite.data import bpe_dropout, datagen, seeded_shuffle, word_alignment
from t2t_lite.data.vocabulary import Vocabulary, train_vocabulary

MODES = datagen.SPLITS  # "train", "dev", "test"


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"Unknown mode {mode!r}; expected one of {', '.join(MODES)}.")


class Problem(abc.ABC):
    """A registered task: data generation, vocabulary, examples and defaults."""

    has_inputs = True  # False for language-model problems (targets only).
    eval_metrics = []  # The task's own metrics, for information (e.g. ["bleu"]: score decodes with t2t-bleu).
    # The fewest shards per split; a large split gets one per datagen.PAIRS_PER_SHARD pairs.
    num_shards = {"train": 10, "dev": 1, "test": 1}

    def __init__(self, was_reversed: bool = False):
        self.was_reversed = was_reversed

    # -- Names ------------------------------------------------------------------------
    @property
    def base_name(self) -> str:
        """The registered name, without `_rev`: the prefix of the data files."""
        return registry.problem_name(type(self))

    @property
    def name(self) -> str:
        return self.base_name + (registry.REVERSE_SUFFIX if self.was_reversed else "")

    # -- Task defaults ----------------------------------------------------------------
    def decode_defaults(self) -> dict:
        """beam_size / alpha / extra_length this task decodes with; {} = the hparams' values."""
        return {}

    # -- Vocabulary -------------------------------------------------------------------
    @abc.abstractmethod
    def vocabulary(self, data_dir: str):
        """The Vocabulary (or SymbolVocabulary) of inputs and targets."""

    def vocab_size(self, data_dir: str) -> int:
        """Read from the vocabulary, so a model always matches the data it is fed."""
        return self.vocabulary(data_dir).vocab_size

    # -- Data -------------------------------------------------------------------------
    @abc.abstractmethod
    def generate_data(self, data_dir: str, tmp_dir: str) -> datagen.DatagenReport:
        """Writes the vocabulary and the TFRecord files of every split; reuses what exists."""

    def raw_files(self, tmp_dir: str, split: str) -> list:
        """The files `split` is generated from, in `tmp_dir` or not (recorded to notice changes); [] = none."""
        return []

    def generated_files(self, data_dir: str) -> list:
        """Files besides the shards that datagen writes into `data_dir` (e.g. the vocabulary)."""
        return []

    def filepattern(self, data_dir: str, mode: str) -> str:
        check_mode(mode)
        return datagen.filepattern(data_dir, self.base_name, mode)

    def dataset(
        self, mode: str, data_dir: str, hparams=None, *, shuffle_files=None, seed=None, share=None, alignments=False
    ) -> tf.data.Dataset:
        """The examples of `mode` as `{"inputs", "targets"}` int32 vectors ending in EOS.

        `alignments`: each example also holds "alignment", bool [len(targets), len(inputs)], True where
        a target subword is linked to a source subword (`t2t_lite.data.word_alignment`); the shards
        must have been written with `t2t-datagen --train_alignments` (`word_alignment.records_have_links`).

        `shuffle_files` (default: only in "train") shuffles the order of the shards
        with `seed`; otherwise shards are read one after another, in file order.
        `share=(index, count)` reads only the shards index::count (in name order): one
        training replica's own files (`t2t_lite.train.replica_input`).
        `hparams` is accepted for tensor2tensor's signature; batching by hparams
        happens in `t2t_lite.data.input_pipeline.batched_dataset`. The shards of a split other
        than "train" are read through first, so a damaged one stops with its name
        (`datagen.DamagedShardError`); the training pipeline names one when a read fails.
        """
        del hparams
        files = datagen.complete_shards(data_dir, self.base_name, mode)
        if not files:
            raise FileNotFoundError(
                f"No {mode} data for problem {self.name}: nothing matches {self.filepattern(data_dir, mode)}. "
                f"Run t2t-datagen --problem={self.base_name} --data_dir={data_dir} --tmp_dir=<raw data dir>."
            )
        if share is not None:
            index, count = share
            if not files[index::count]:
                raise ValueError(
                    f"Problem {self.name}: share {index}::{count} of the {len(files)} {mode} shards "
                    f"in {data_dir} holds no file."
                )
            files = files[index::count]
        if mode != "train":  # read in full: a damaged shard is named now, not by a read error naming no file
            datagen.check_shards(files)
        if shuffle_files is None:
            shuffle_files = mode == "train"
        filenames = tf.data.Dataset.from_tensor_slices(files)
        if shuffle_files:
            filenames = seeded_shuffle.shuffle(filenames, len(files), seed)
        records = filenames.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(len(files), 8) if shuffle_files else 1,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        if alignments:
            return records.map(self._parse_aligned_example, num_parallel_calls=tf.data.AUTOTUNE)
        return records.map(self._parse_example, num_parallel_calls=tf.data.AUTOTUNE)

    def _parse_example(self, record):
        features = {
            "inputs": tf.io.VarLenFeature(tf.int64),
            "targets": tf.io.VarLenFeature(tf.int64),
        }
        parsed = tf.io.parse_single_example(record, features)
        inputs = tf.cast(tf.sparse.to_dense(parsed["inputs"]), tf.int32)
        targets = tf.cast(tf.sparse.to_dense(parsed["targets"]), tf.int32)
        if self.was_reversed:
            inputs, targets = targets, inputs
        return {"inputs": inputs, "targets": targets}

    def _parse_aligned_example(self, record):
        example = self._parse_example(record)
        links = tf.io.parse_single_example(record, {word_alignment.ALIGNMENT: tf.io.VarLenFeature(tf.int64)})
        example[word_alignment.ALIGNMENT] = word_alignment.alignment_matrix(
            tf.sparse.to_dense(links[word_alignment.ALIGNMENT]),
            tf.size(example["inputs"]),
            tf.size(example["targets"]),
            transpose=self.was_reversed,
        )
        return example


class TextProblem(Problem):
    """Sentence pairs with one shared BPE vocabulary (§5.1), trained on the training pairs."""

    eval_metrics = ["bleu"]
    approx_vocab_size = 8000  # Requested vocabulary size; small corpora may learn fewer.
    max_vocab_sentences = 1_000_000  # Sentences sampled to train the vocabulary on large corpora.
    max_subword_length = 1024  # Training pairs with a longer side (in ids) are dropped at datagen.
    drop_identical_pairs = False  # Drop pairs whose source equals their target (e.g. untranslated).
    bpe_dropout = 0.0  # BPE-dropout's p for the training split (t2t_lite.data.bpe_dropout); 0 = deterministic BPE.
    bpe_dropout_copies = 16  # With bpe_dropout: differently segmented copies of each training pair written.

    @abc.abstractmethod
    def text_pairs(self, tmp_dir: str, split: str):
        """An iterable of (source, target) strings of `split`, or None when the split has no raw data."""

    def whole_pieces(self) -> frozenset:
        """Strings the vocabulary keeps as one piece wherever they occur (none but for structured targets)."""
        return frozenset()

    def drop_reason(self, source: str, target: str):
        """Why a normalized pair is not written (one of datagen's DROP_* reasons), or None to keep it."""
        if not source or not target:
            return datagen.DROP_EMPTY
        if self.drop_identical_pairs and source == target:
            return datagen.DROP_IDENTICAL
        return None

    def vocab_filename(self) -> str:
        return f"vocab.{self.base_name}.model"

    def vocabulary(self, data_dir: str) -> Vocabulary:
        return Vocabulary(os.path.join(data_dir, self.vocab_filename()))

    def generated_files(self, data_dir: str) -> list:
        return [os.path.join(data_dir, self.vocab_filename()), bpe_dropout.record_path(data_dir, self.base_name)]

    def adopt_vocabulary(self, data_dir: str, vocab_file: str) -> None:
        """Makes `vocab_file` (another problem's or run's) this problem's vocabulary in `data_dir`.

        What a warm start needs (`t2t_lite.train.warm_start`): the new corpus encoded with the
        vocabulary the source model was trained with. tensor2tensor users copied the file by
        hand; `t2t-datagen --vocab_from` does it, and refuses to replace another vocabulary
        that data in `data_dir` may have been encoded with.
        """
        source = Vocabulary(vocab_file)  # a missing or unreadable file stops here, named
        destination = os.path.join(data_dir, self.vocab_filename())
        if os.path.exists(destination):
            if Vocabulary(destination).fingerprint != source.fingerprint:
                raise ValueError(
                    f"--vocab_from={vocab_file}: {destination} exists and is another vocabulary (the data in "
                    f"--data_dir may be encoded with it). Use a new --data_dir, or add --overwrite to regenerate "
                    f"{self.base_name}'s data with --vocab_from's."
                )
            return
        temporary = f"{destination}.tmp-{os.getpid()}"
        shutil.copyfile(vocab_file, temporary)
        os.replace(temporary, destination)
        print(f"Using the vocabulary {vocab_file} for {self.base_name}: copied to {destination}.")

    def generate_data(self, data_dir: str, tmp_dir: str, train_alignments: str = None) -> datagen.DatagenReport:
        """`train_alignments`: Pharaoh word links of the training pairs, stored in their records
        (`t2t_lite.data.word_alignment`)."""
        report = datagen.DatagenReport(self.base_name)
        bpe_dropout.check_settings(self.bpe_dropout, self.bpe_dropout_copies, self.base_name)
        if train_alignments and self.bpe_dropout:
            raise ValueError(
                f"--train_alignments: {self.base_name} writes its training pairs in BPE-dropout segmentations "
                f"(bpe_dropout={self.bpe_dropout}), and their subword links are not mapped per segmentation. "
                f"Align a problem with bpe_dropout=0."
            )
        vocabulary = self._vocabulary_or_train(data_dir, tmp_dir)
        for split in datagen.SPLITS:
            files = datagen.complete_shards(data_dir, self.base_name, split)
            if files:
                if split == "train":
                    bpe_dropout.check_reusable(data_dir, self.base_name, self.bpe_dropout, self.bpe_dropout_copies)
                    self._check_aligned_alike(files, train_alignments, data_dir)
                report.reused.append(split)
                continue
            pairs = self.text_pairs(tmp_dir, split)
            if pairs is None:
                report.missing.append(split)
                continue
            aligned = split == "train" and bool(train_alignments)
            if aligned:
                pairs = word_alignment.with_links(pairs, train_alignments)
                report.aligned.append(split)
            drops = report.dropped.setdefault(split, collections.Counter())
            cleaned = datagen.clean_pairs(pairs, drops, self.drop_reason)
            examples = self._encode(split, cleaned, vocabulary, drops, aligned)
            if split == "train":
                bpe_dropout.write_record(data_dir, self.base_name, self.bpe_dropout, self.bpe_dropout_copies)
                if self.bpe_dropout:
                    report.bpe_dropout[split] = (self.bpe_dropout, self.bpe_dropout_copies)
            try:
                report.written[split] = datagen.write_shuffled_shards(
                    examples, data_dir, self.base_name, split, self.num_shards[split], f"{self.base_name} {split}"
                )
            except datagen.EmptySplitError as error:
                reasons = datagen.format_drops(drops) or "none read"
                raise datagen.EmptySplitError(
                    f"{error} Dropped: {reasons}. Check the raw {split} data in --tmp_dir={tmp_dir}."
                ) from None
        return report

    def _encode(self, split: str, pairs, vocabulary: Vocabulary, drops: collections.Counter, aligned=False):
        """(inputs, targets) id pairs of `split`: with bpe_dropout, sampled copies of the training pairs.

        `aligned`: `pairs` are (source, target, Pharaoh line) triples, and the examples carry subword links.
        """
        if split != "train":  # dev and test are scored on every sentence, segmented as decoding will be
            return datagen.encode_pairs(pairs, vocabulary.tokenizer, drops)
        if self.bpe_dropout:
            return bpe_dropout.sampled_pairs(
                pairs, vocabulary, self.bpe_dropout, self.bpe_dropout_copies, drops, max_length=self.max_subword_length
            )
        word_pieces = vocabulary.word_pieces() if aligned else None
        return datagen.encode_pairs(
            pairs, vocabulary.tokenizer, drops, max_length=self.max_subword_length, word_pieces=word_pieces
        )

    def _check_aligned_alike(self, files: list, train_alignments: str, data_dir: str) -> None:
        """Alignments given for training shards written without them (a problem with no raw-file record)."""
        if train_alignments and not word_alignment.records_have_links(files):
            raise ValueError(
                f"--train_alignments: the {self.base_name} training files in --data_dir={data_dir} were written "
                f"without alignments. Rerun t2t-datagen with --overwrite to write them afresh with the links, or "
                f"choose another --data_dir."
            )

    def _vocabulary_or_train(self, data_dir: str, tmp_dir: str) -> Vocabulary:
        path = os.path.join(data_dir, self.vocab_filename())
        if os.path.exists(path):
            return Vocabulary(path)
        encoded = [split for split in datagen.SPLITS if datagen.complete_shards(data_dir, self.base_name, split)]
        if encoded:  # a new vocabulary would not match the ids in them, and they would be reused
            raise ValueError(
                f"{data_dir} holds {self.base_name} {', '.join(encoded)} files but not {self.vocab_filename()}, "
                f"the vocabulary they were encoded with. Restore it, or remove "
                f"{datagen.filepattern(data_dir, self.base_name, '*')} to encode everything afresh."
            )
        pairs = self.text_pairs(tmp_dir, "train")
        if pairs is None:
            raise FileNotFoundError(f"Problem {self.base_name} found no training data in --tmp_dir={tmp_dir}.")
        print(f"Training a {self.approx_vocab_size}-piece BPE vocabulary for {self.base_name} -> {path}")
        sides = (side for pair in pairs for side in pair)
        return train_vocabulary(
            sides,
            path,
            self.approx_vocab_size,
            max_sentences=self.max_vocab_sentences,
            whole_pieces=self.whole_pieces(),
        )
