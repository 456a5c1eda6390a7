"""Training pairs' word links (t2t-datagen --train_alignments): checked against their corpus, mapped to subwords.

The mapping is checked on hand-written multi-piece words, each word's pieces counted from SentencePiece's own
segmentation of that word alone (BPE pieces never cross a space), not from the code's word indices; and through
t2t-datagen on translate_files, where dropped pairs must keep the lines of the others in step.
"""

import os

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.data import bpe_dropout, datagen, raw_fingerprint, word_alignment
from t2t_lite.data import vocabulary as vocabulary_lib
from t2t_lite.data.word_alignment import AlignmentFileError

SENTENCES = [
    "the unbelievable cat sleeps quickly",
    "die unglaubliche Katze schläft schnell",
    "a dog runs over the green street",
    "ein Hund rennt über die grüne Straße",
] * 20


# -- Lines checked against their pairs ----------------------------------------------------------
def test_pharaoh_lines_parse_into_source_target_word_pairs():
    assert word_alignment.parse_links("0-0 2-1  1-3\n") == [(0, 0), (2, 1), (1, 3)]
    assert word_alignment.parse_links("") == []
    for bad in ("0-", "a-1", "0:1", "0-1-2", "-1-0"):
        with pytest.raises(ValueError, match="is not a link source-target"):
            word_alignment.parse_links(bad)


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


PAIRS = [("a b c", "x y"), ("d", "z")]


@pytest.mark.parametrize(
    "lines, message",
    [
        (["0-0 2-1"], r"has 1 lines, but the training data has more pairs \(at least 2\)"),
        (["0-0", "0-0", "0-0"], r"has more lines than the training data has pairs \(2\): line 3 aligns no pair"),
        (["0-0 3-1", "0-0"], r":1: link 3-1 is outside the pair, whose source has 3 words and target 2"),
        (["0-0", "0-1"], r":2: link 0-1 is outside the pair, whose source has 1 words and target 1"),
        (["0-0", "0=0"], r":2: '0=0' is not a link source-target"),
    ],
)
def test_a_file_that_does_not_fit_its_pairs_stops_naming_file_and_line(tmp_path, lines, message):
    path = write(tmp_path / "train.align", lines)
    with pytest.raises(AlignmentFileError, match=message) as error:
        list(word_alignment.with_links(PAIRS, path))  # pairs read twice: checked before the first triple
    assert str(error.value).startswith(path) and "\n" not in str(error.value)
    assert "Write the links of training pair n on line n" in str(error.value)


def test_a_stream_of_pairs_read_once_is_checked_as_it_goes(tmp_path):
    path = write(tmp_path / "train.align", ["2-1", "0-1"])
    triples = word_alignment.with_links(iter(PAIRS), path)
    stream = iter(triples)
    assert next(stream) == ("a b c", "x y", "2-1")
    with pytest.raises(AlignmentFileError, match=":2: link 0-1 is outside"):
        next(stream)


def test_bytes_that_are_not_utf8_are_named_by_line(tmp_path):
    path = tmp_path / "train.align"
    path.write_bytes(b"0-0\n\xff0-0\n")
    with pytest.raises(AlignmentFileError, match=r"train.align:2: not valid UTF-8"):
        word_alignment.with_links(PAIRS, str(path))


# -- Words to subwords ---------------------------------------------------------------------------
def test_a_word_link_links_every_piece_of_the_one_word_with_every_piece_of_the_other():
    # Source words: 0 in two pieces, 1 in one, 2 in three, then EOS; target: 0 in one piece, 1 in two, EOS.
    source_words = [0, 0, 1, 2, 2, 2, -1]
    target_words = [0, 1, 1, -1]
    flat = word_alignment.subword_links("0-1 2-0", source_words, target_words)
    pairs = list(zip(flat[::2], flat[1::2]))
    assert pairs == [(0, 1), (0, 2), (1, 1), (1, 2), (3, 0), (4, 0), (5, 0)]  # EOS (6; 3) in no link


def test_the_links_become_a_target_by_source_matrix_transposed_for_a_reversed_problem():
    flat = tf.constant([0, 1, 2, 0, 2, 1], tf.int64)  # (s, t): (0, 1), (2, 0), (2, 1)
    expected = np.zeros((3, 4), bool)  # 3 target ids (EOS included), 4 source ids
    expected[1, 0] = expected[0, 2] = expected[1, 2] = True
    np.testing.assert_array_equal(word_alignment.alignment_matrix(flat, 4, 3).numpy(), expected)
    reversed_pair = word_alignment.alignment_matrix(flat, 3, 4, transpose=True).numpy()  # inputs were targets
    np.testing.assert_array_equal(reversed_pair, expected.T)


# -- Through t2t-datagen --------------------------------------------------------------------------
def pieces_per_word(model_path, text):
    """How many pieces SentencePiece cuts each whitespace-separated word of `text` into, word by word."""
    processor = sentencepiece.SentencePieceProcessor(model_file=model_path)
    return [len(processor.encode(word)) for word in text.split()]


def expected_links(counts_source, counts_target, word_links):
    """The subword links (s, t) of word links, each word's pieces laid out from its piece counts."""
    starts_source, starts_target = np.cumsum([0] + counts_source), np.cumsum([0] + counts_target)
    return {
        (s, t)
        for j, i in word_links
        for s in range(starts_source[j], starts_source[j + 1])
        for t in range(starts_target[i], starts_target[i + 1])
    }


def records(data_dir, split="train"):
    """{source ids: (target ids, links)} of a split's records."""
    found = {}
    for path in datagen.complete_shards(data_dir, "translate_files", split):
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            feature = tf.train.Example.FromString(record).features.feature
            links = list(feature["alignment"].int64_list.value) if "alignment" in feature else None
            found[tuple(feature["inputs"].int64_list.value)] = (list(feature["targets"].int64_list.value), links)
    return found


def small_problem():
    """translate_files with a vocabulary small enough that words come in several pieces."""
    problem = registry.problem("translate_files")
    problem.approx_vocab_size = 320
    return problem


@pytest.fixture
def corpus(tmp_path):
    """translate_files' raw files: a pair dropped as empty and one too long between aligned pairs."""
    tmp_dir = tmp_path / "tmp"
    tmp_dir.mkdir()
    english = ["the unbelievable cat sleeps", "", "a dog runs", "the green street " * 30, "quickly the cat"]
    german = ["die unglaubliche Katze schläft", "Hund", "ein Hund rennt", "die grüne Straße " * 30, "schnell die Katze"]
    links = ["0-0 1-1 2-2 3-3", "", "0-0 1-1 2-2", "0-0", "0-0 1-1 2-2"]
    write(tmp_dir / "train.src", english + SENTENCES[::2])
    write(tmp_dir / "train.tgt", german + SENTENCES[1::2])
    alignments = write(tmp_path / "train.align", links + [""] * 40)
    return tmp_dir, alignments, list(zip(english, german, links))


def test_datagen_stores_each_kept_pairs_subword_links_and_drops_lines_with_their_pairs(tmp_path, corpus):
    tmp_dir, alignments, pairs = corpus
    data_dir = str(tmp_path / "data")
    problem = small_problem()
    problem.max_subword_length = 64  # the long pair is dropped as too long
    report = datagen.generate(problem, data_dir, str(tmp_dir), train_alignments=alignments)
    assert report.dropped["train"] == {datagen.DROP_EMPTY: 1, datagen.DROP_TOO_LONG: 1}
    assert "translate_files train: wrote 43 pairs with their subword links (--train_alignments)" in report.summary()
    model_path = os.path.join(data_dir, "vocab.translate_files.model")
    vocabulary = vocabulary_lib.Vocabulary(model_path)
    written = records(data_dir)
    for source, target, line in [pairs[0], pairs[2], pairs[4]]:
        word_links = word_alignment.parse_links(line)
        counts_source, counts_target = pieces_per_word(model_path, source), pieces_per_word(model_path, target)
        assert max(counts_source) > 1 or max(counts_target) > 1 or source == "a dog runs"
        targets, flat = written[tuple(vocabulary.encode(source) + [1])]
        assert targets == vocabulary.encode(target) + [1]
        assert set(zip(flat[::2], flat[1::2])) == expected_links(counts_source, counts_target, word_links)
    assert "unbelievable" in pairs[0][0] and pieces_per_word(model_path, "unbelievable") != [1]
    assert all(links is not None for _, links in written.values())  # every record of the split has the feature
    assert all(links is None for _, links in records(data_dir, "dev").values())


def test_the_alignment_file_is_a_raw_file_of_the_train_split(tmp_path, corpus):
    tmp_dir, alignments, _ = corpus
    data_dir = str(tmp_path / "data")
    datagen.generate(small_problem(), data_dir, str(tmp_dir), train_alignments=alignments)
    recorded = raw_fingerprint.read_record(raw_fingerprint.record_path(data_dir, "translate_files"))["train"]
    assert raw_fingerprint.file_name(alignments, str(tmp_dir)) in recorded
    with open(alignments, "a", encoding="utf-8") as file:
        file.write("\n")  # a line more: other alignments
    with pytest.raises(raw_fingerprint.RawDataChangedError, match="train.align"):
        datagen.generate(small_problem(), data_dir, str(tmp_dir), train_alignments=alignments)
    with pytest.raises(raw_fingerprint.RawDataChangedError, match="train.align"):  # or none: a change too
        datagen.generate(small_problem(), data_dir, str(tmp_dir))


def test_bpe_dropout_segmentations_are_refused_and_so_are_problems_without_text_pairs(tmp_path, corpus):
    tmp_dir, alignments, _ = corpus
    problem = small_problem()
    problem.bpe_dropout = 0.1
    with pytest.raises(ValueError, match="BPE-dropout segmentations .* Align a problem with bpe_dropout=0"):
        datagen.generate(problem, str(tmp_path / "data"), str(tmp_dir), train_alignments=alignments)
    assert not os.path.exists(bpe_dropout.record_path(str(tmp_path / "data"), "translate_files"))
    with pytest.raises(ValueError, match="--train_alignments: problem algorithmic_reverse makes no text pairs"):
        datagen.generate(
            registry.problem("algorithmic_reverse"), str(tmp_path / "d2"), str(tmp_dir), train_alignments=alignments
        )
