"""BPE-dropout (Provilkov et al., 2020) at datagen: sampled segmentations of the training pairs only.

Checked against the method's definition, through sentencepiece's own deterministic encoder and
decoder: every sampled copy spells the same text; skipping merges only splits pieces further
(with every merge skipped, BPE leaves characters); dev and test keep the segmentation decoding
uses; the files are the same from run to run and from process to process. The sampler itself
(`bpe_dropout.Segmenter`) is checked against sentencepiece: without dropout it is sentencepiece's
encoder id for id, and with dropout it splits as much as sentencepiece's own BPE-dropout sampler.
"""

import collections
import io
import os
import random
import statistics
import subprocess
import sys

import pytest
import sentencepiece
import tensorflow as tf
from test_problem import read_records, sentence_pairs, write_corpus

from t2t_lite.data import bpe_dropout, datagen
from t2t_lite.data.vocabulary import EOS_ID, Vocabulary, normalize_text
from t2t_lite.problems.translate_files import TranslateFiles

COPIES = 4


class TinyFilesBpeDropout(TranslateFiles):
    approx_vocab_size = 400
    num_shards = {"train": 2, "dev": 1, "test": 1}
    bpe_dropout = 0.1
    bpe_dropout_copies = COPIES


def generate(root, problem=None):
    tmp_dir, data_dir = os.path.join(root, "raw"), os.path.join(root, "data")
    pairs = sentence_pairs()
    write_corpus(tmp_dir, "train", pairs[:80])
    write_corpus(tmp_dir, "dev", pairs[80:90])
    write_corpus(tmp_dir, "test", pairs[90:])
    problem = problem or TinyFilesBpeDropout()
    report = datagen.generate(problem, data_dir, tmp_dir)
    return report, data_dir, pairs


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generate(str(tmp_path_factory.mktemp("bpe_dropout")))


def split_records(data_dir, split, base_name=None):
    names = datagen.complete_shards(data_dir, base_name or TinyFilesBpeDropout().base_name, split)
    return [record for name in names for record in read_records(name)]


def processor(data_dir):
    return sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(data_dir, TinyFilesBpeDropout().vocab_filename())
    )


def text(pieces, ids):
    assert ids[-1] == EOS_ID
    return pieces.decode(ids[:-1])


def test_each_training_pair_is_written_once_per_copy_and_spells_the_same_text(generated):
    report, data_dir, pairs = generated
    pieces = processor(data_dir)
    records = split_records(data_dir, "train")
    assert report.written["train"] == len(records) == COPIES * 80
    written = collections.Counter((text(pieces, inputs), text(pieces, targets)) for inputs, targets in records)
    expected = collections.Counter({(normalize_text(s), normalize_text(t)): COPIES for s, t in pairs[:80]})
    assert written == expected
    assert f"wrote {COPIES * 80} pairs ({COPIES} BPE-dropout segmentations of each, p=0.1)" in report.summary()


def test_skipped_merges_give_varied_finer_segmentations_of_the_training_pairs(generated):
    _, data_dir, _ = generated
    pieces = processor(data_dir)
    segmentations = collections.defaultdict(set)
    sampled = deterministic = 0
    for inputs, targets in split_records(data_dir, "train"):
        for ids in (inputs, targets):
            segmentations[text(pieces, ids)].add(tuple(ids))
            sampled += len(ids)
            deterministic += len(pieces.encode(text(pieces, ids))) + 1
    assert sampled > deterministic  # a skipped merge leaves two pieces where BPE had one, never fewer
    assert sum(len(ids) > 1 for ids in segmentations.values()) > len(segmentations) // 2


def test_dev_and_test_keep_the_segmentation_decoding_uses(generated):
    _, data_dir, pairs = generated
    pieces = processor(data_dir)
    for split, split_pairs in (("dev", pairs[80:90]), ("test", pairs[90:])):
        records = split_records(data_dir, split)
        assert len(records) == len(split_pairs)
        for inputs, targets in records:
            for ids in (inputs, targets):
                assert ids == pieces.encode(text(pieces, ids)) + [EOS_ID]


def test_every_merge_skipped_leaves_characters(generated):
    """The paper's limit: with p → 1 no merge is applied and a word is its characters."""
    _, data_dir, pairs = generated
    vocabulary = Vocabulary(os.path.join(data_dir, TinyFilesBpeDropout().vocab_filename()))
    pieces = processor(data_dir)
    sentence = normalize_text(pairs[0][0])
    ((inputs, _),) = bpe_dropout.sampled_pairs([(sentence, sentence)], vocabulary, 0.999999, 1, collections.Counter())
    characters = [pieces.id_to_piece(i) for i in inputs[:-1]]
    assert "".join(characters).replace("▁", " ").strip() == sentence
    assert all(len(piece.lstrip("▁")) <= 1 for piece in characters)


def test_two_runs_write_the_same_files(generated, tmp_path):
    _, data_dir, _ = generated
    _, again, _ = generate(str(tmp_path))
    for split in ("train", "dev"):
        assert split_records(again, split) == split_records(data_dir, split)


def test_another_process_writes_the_same_files(generated, tmp_path):
    """sentencepiece's own sampler, seeded alike, segmented otherwise in every process; ours does not."""
    _, data_dir, _ = generated
    tests = os.path.dirname(os.path.abspath(__file__))
    script = (
        f"import sys; sys.path.insert(0, {tests!r}); import test_bpe_dropout; "
        f"test_bpe_dropout.generate({str(tmp_path)!r})"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert split_records(os.path.join(tmp_path, "data"), "train") == split_records(data_dir, "train")


UNSEEN = ["☃ 漢字 € ﬁ", "the cat sees ☃☃ 42 Äpfel.", "x" * 50, "Ǆ"]  # characters the vocabulary never saw
# sentencepiece's normalizer drops "▁"s at the end, literal ones too, and keeps them elsewhere.
LITERAL_SPACE_SYMBOLS = ["▁", "▁▁", "x▁", "x ▁", "▁x", "▁ x", "a▁▁b", "the ▁ cat▁"]


def random_strings(count, seed=0):
    """Normalized strings of letters, spaces, "▁" and characters the vocabulary never saw."""
    draws, alphabet = random.Random(seed), ["t", "h", "e", "a", " ", "▁", "☃", "Ä", "\u200b", "."]
    return [normalize_text("".join(draws.choice(alphabet) for _ in range(draws.randint(0, 12)))) for _ in range(count)]


def sentencepiece_model(**options):
    """The test sentences and a model sentencepiece's own trainer learns from them (BPE with
    vocabulary.train_vocabulary's normalization unless `options` say otherwise)."""
    sentences = [normalize_text(side) for pair in sentence_pairs() for side in pair]
    model = io.BytesIO()
    settings = dict(model_type="bpe", vocab_size=400, hard_vocab_limit=False, normalization_rule_name="identity")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, minloglevel=2, **{**settings, **options}
    )
    return sentences, model.getvalue()


@pytest.mark.parametrize("byte_fallback", [True, False])
def test_without_dropout_the_segmenter_is_sentencepieces_encoder(byte_fallback):
    """Unknown characters included: their bytes with byte fallback, one unknown id per run of them without."""
    sentences, model = sentencepiece_model(byte_fallback=byte_fallback)
    reference = sentencepiece.SentencePieceProcessor(model_proto=model)
    segmenter = bpe_dropout.Segmenter(model)
    for sentence in sentences + UNSEEN + LITERAL_SPACE_SYMBOLS + random_strings(2000) + [""]:
        assert segmenter.encode(sentence, 0.0, random.Random(1)) == reference.encode(sentence), repr(sentence)
    unseen_ids = reference.encode(UNSEEN[0])
    assert (reference.unk_id() in unseen_ids) != byte_fallback  # both ways of writing unknowns were met


@pytest.mark.parametrize("dropout", [0.1, 0.5])
def test_merges_are_skipped_as_often_as_by_sentencepieces_sampler(dropout):
    """The mean pieces per sentence over 20 samples of each of 200 sentences: the means of five
    seeds spread by about 0.03 pieces (13.2 without dropout, 16.3 at p = 0.1, 25.3 at p = 0.5)."""
    sentences, model = sentencepiece_model(byte_fallback=True)
    reference, segmenter, draws = (
        sentencepiece.SentencePieceProcessor(model_proto=model),
        bpe_dropout.Segmenter(model),
        random.Random(5),
    )
    ours = statistics.mean(len(segmenter.encode(s, dropout, draws)) for s in sentences * 20)
    sentencepiece.set_random_generator_seed(5)
    theirs = statistics.mean(
        map(len, reference.encode(sentences * 20, enable_sampling=True, alpha=dropout, nbest_size=-1))
    )
    deterministic = statistics.mean(map(len, reference.encode(sentences)))
    assert abs(ours - theirs) < 0.2
    assert ours > deterministic + 2


def test_a_vocabulary_not_made_by_datagen_is_refused_by_name():
    _, model = sentencepiece_model(model_type="unigram", vocab_size=60)
    with pytest.raises(
        ValueError,
        match=r"^BPE-dropout samples .*; their.model is not one \(model_type 1, "
        r".*Let t2t-datagen train the vocabulary",
    ):
        bpe_dropout.Segmenter(model, "their.model")


def test_sampled_pairs_too_long_are_counted_not_written(generated, tmp_path):
    # The limit is the median length of the copies written without one, so that some copies pass and
    # some do not whatever lengths this machine's sampling gives; the same raw data samples the same
    # copies (test_two_runs_write_the_same_files), so exactly the longer ones must be dropped.
    _, unlimited_dir, _ = generated
    unlimited = collections.Counter(map(tuple_pair, split_records(unlimited_dir, "train")))
    lengths = sorted(max(map(len, pair)) for pair in unlimited.elements())
    limit = lengths[len(lengths) // 2]

    class ShortBpeDropout(TinyFilesBpeDropout):
        max_subword_length = limit

    report, data_dir, _ = generate(str(tmp_path), ShortBpeDropout())
    kept = collections.Counter({pair: n for pair, n in unlimited.items() if max(map(len, pair)) <= limit})
    dropped = report.dropped["train"][bpe_dropout.DROP_TOO_LONG_COPY]
    assert 0 < dropped == COPIES * 80 - sum(kept.values())
    assert report.written["train"] == sum(kept.values())
    assert f"{dropped} too long (sampled copies, counted one by one)" in report.summary()
    written = collections.Counter(map(tuple_pair, split_records(data_dir, "train", ShortBpeDropout().base_name)))
    assert written == kept


def tuple_pair(record):
    inputs, targets = record
    return tuple(inputs), tuple(targets)


@pytest.mark.parametrize(
    "dropout, copies, message",
    [
        (1.0, 4, "bpe_dropout=1.0 is a probability of skipping a merge; set it in [0, 1)"),
        (-0.1, 4, "bpe_dropout=-0.1 is a probability"),
        ("0.1", 4, "bpe_dropout=0.1 is a probability"),  # a string, not a number
        (0.1, 0, "bpe_dropout_copies=0: write at least 1 sampled copy"),
        (0.1, True, "bpe_dropout_copies=True: write at least 1 sampled copy"),
    ],
)
def test_bad_settings_name_the_problem_and_the_property(tmp_path, dropout, copies, message):
    class BadBpeDropout(TinyFilesBpeDropout):
        bpe_dropout = dropout
        bpe_dropout_copies = copies

    with pytest.raises(ValueError, match=r"^" + BadBpeDropout().base_name + ": ") as error:
        generate(str(tmp_path), BadBpeDropout())
    assert message in str(error.value)
    assert not tf.io.gfile.glob(os.path.join(tmp_path, "data", "*-train-*"))


SEED = f"(sampling seed {bpe_dropout.SAMPLING_SEED})"


@pytest.mark.parametrize(
    "first, second, written, now",
    [
        (
            (0.1, COPIES),
            (0.0, COPIES),
            f"bpe_dropout=0.1, bpe_dropout_copies={COPIES} {SEED}",
            "bpe_dropout=0 (deterministic BPE)",
        ),
        (
            (0.1, COPIES),
            (0.3, 2),
            f"bpe_dropout=0.1, bpe_dropout_copies={COPIES} {SEED}",
            f"bpe_dropout=0.3, bpe_dropout_copies=2 {SEED}",
        ),
        (
            (0.0, COPIES),
            (0.1, COPIES),
            "bpe_dropout=0 (deterministic BPE)",
            f"bpe_dropout=0.1, bpe_dropout_copies={COPIES} {SEED}",
        ),
    ],
)
def test_training_files_segmented_otherwise_are_not_reused(tmp_path, first, second, written, now):
    """A rerun with other settings stops, naming both and --overwrite, which writes the split afresh."""

    def problem(dropout, copies):
        class Settings(TinyFilesBpeDropout):
            bpe_dropout, bpe_dropout_copies = dropout, copies

        return Settings()

    _, data_dir, _ = generate(str(tmp_path), problem(*first))
    before = split_records(data_dir, "train", problem(*first).base_name)
    assert before
    with pytest.raises(ValueError, match="--overwrite") as error:
        generate(str(tmp_path), problem(*second))
    name = problem(*second).base_name
    assert (
        f"The {name} training files in --data_dir={data_dir} were written with {written}, but {name} now sets "
        f"{now}." in str(error.value)
    )
    assert split_records(data_dir, "train", problem(*first).base_name) == before  # nothing was touched

    tmp_dir = os.path.join(tmp_path, "raw")
    report = datagen.generate(problem(*second), data_dir, tmp_dir, overwrite=True)
    assert report.written["train"] == (second[1] if second[0] else 1) * 80
    again = datagen.generate(problem(*second), data_dir, tmp_dir)  # the same settings: reused
    assert again.reused == ["train", "dev", "test"]
