"""The shared BPE vocabulary (§5.1): a standard SentencePiece file, lossless in and out of the graph."""

import os

import pytest
import sentencepiece
import tensorflow as tf

from t2t_lite.data.vocabulary import (
    EOS_ID,
    PAD_ID,
    UNK_ID,
    DamagedVocabularyError,
    SymbolVocabulary,
    Vocabulary,
    normalize_text,
    normalize_text_in_graph,
    train_vocabulary,
)

TRAINING_TEXT = [
    "The committee approved the budget for 2014 after a long debate.",
    "Der Ausschuss billigte den Haushalt für 2014 nach einer langen Debatte.",
    "Le comité a approuvé le budget pour 2014 après un long débat.",
    "Prices rose by 3.5 % in the first quarter, the office said.",
    "Die Preise stiegen im ersten Quartal um 3,5 %, teilte das Amt mit.",
    "Les prix ont augmenté de 3,5 % au premier trimestre.",
    "„Wir müssen handeln“, sagte die Ministerin in Brüssel.",
    "« Nous devons agir », a déclaré la ministre à Bruxelles.",
    "Visit https://www.example.org/news?id=42&lang=de for details.",
] * 20

# Real-text hazards: umlauts, ß, accents, typographic quotes and dashes, digits, URLs,
# characters never seen in training (CJK, emoji, ligature), and whitespace to normalize.
HARD_STRINGS = [
    "Größere Maßnahmen für Äpfel, Öl und Übungen",
    "L’été à Noël : où est le café crème ?",
    "„Anführungszeichen“ ‚einfach‘ “double” ‘single’ «guillemets» — en–dash …",
    "Call +49 (0)30 1234-5678 or visit https://example.com/a/b?c=1&d=%20e#frag",
    "  repeated   spaces\tand\ttabs\n and a newline  ",
    "日本語のテキスト, emoji 🙂, ligature ﬁ, no\u00a0break",
]


@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("vocab") / "vocab.test.model")
    return train_vocabulary(TRAINING_TEXT, path, vocab_size=320)


def test_special_ids_in_a_standard_sentencepiece_file(vocabulary):
    processor = sentencepiece.SentencePieceProcessor(model_file=vocabulary.model_path)
    assert processor.pad_id() == PAD_ID == 0
    assert processor.eos_id() == EOS_ID == 1
    assert processor.unk_id() == UNK_ID == 2
    assert processor.bos_id() == -1
    assert vocabulary.vocab_size == processor.get_piece_size()


def test_in_graph_normalization_matches_python():
    normalized = normalize_text_in_graph(tf.constant(HARD_STRINGS + ["\u2009thin\u3000ideographic\x1f"]))
    expected = [" ".join(line.split()) for line in HARD_STRINGS] + ["thin ideographic"]
    assert [line.decode("utf-8") for line in normalized.numpy()] == expected


def test_round_trip_through_the_in_graph_tokenizer(vocabulary):
    ids = vocabulary.tokenizer.tokenize(normalize_text_in_graph(tf.constant(HARD_STRINGS)))
    assert ids.dtype == tf.int32
    text = [line.decode("utf-8") for line in vocabulary.tokenizer.detokenize(ids).numpy()]
    assert text == [" ".join(line.split()) for line in HARD_STRINGS]


def test_python_and_graph_tokenization_agree(vocabulary):
    in_graph = vocabulary.tokenizer.tokenize(normalize_text_in_graph(tf.constant(HARD_STRINGS))).to_list()
    assert in_graph == [vocabulary.encode(line) for line in HARD_STRINGS]
    for line, ids in zip(HARD_STRINGS, in_graph):
        assert vocabulary.decode(ids) == normalize_text(line)
        assert UNK_ID not in ids  # byte fallback spells unseen characters


def test_typographic_characters_are_kept_not_normalized():
    text = "„x“ ‘y’ ﬁ ＡＢ …"
    assert normalize_text(text) == text  # nmt_nfkc would turn ﬁ into fi and ＡＢ into AB


def test_decode_drops_padding_and_stops_at_eos(vocabulary):
    ids = vocabulary.encode("Der Haushalt")
    assert vocabulary.decode(ids + [EOS_ID] + ids + [PAD_ID, PAD_ID]) == "Der Haushalt"
    assert vocabulary.decode([PAD_ID] + ids) == "Der Haushalt"


def test_small_corpus_learns_a_smaller_vocabulary_instead_of_failing(tmp_path):
    vocabulary = train_vocabulary(TRAINING_TEXT[:9], str(tmp_path / "v.model"), vocab_size=5000)
    assert 256 < vocabulary.vocab_size < 5000
    assert vocabulary.decode(vocabulary.encode(HARD_STRINGS[0])) == HARD_STRINGS[0]


def test_whole_pieces_are_one_id_each_where_the_script_rule_would_cut_them(tmp_path):
    trees = ["(S (NP XX )NP (VP XX (NP XX XX )NP )VP . )S", "(S (NP XX XX )NP (VP XX )VP )S"] * 30
    plain = train_vocabulary(trees, str(tmp_path / "plain.model"), vocab_size=300)
    whole = train_vocabulary(
        trees,
        str(tmp_path / "whole.model"),
        vocab_size=300,
        whole_pieces={"(S", ")S", "(NP", ")NP", "(VP", ")VP", "XX"},
    )
    text = "(S (NP XX )NP (VP XX )VP )S"
    assert len(plain.encode(text)) > 8  # "(" is punctuation and "NP" Latin: SentencePiece splits them
    assert len(whole.encode(text)) == 8  # one id a token, word-start mark included
    assert whole.decode(whole.encode(text)) == text


def test_a_vocabulary_smaller_than_the_bytes_and_characters_says_how_many_it_needs(tmp_path):
    """Byte fallback takes 256 pieces and each character one: SentencePiece refuses less, in its own words."""
    with pytest.raises(ValueError, match=r"A 40-piece vocabulary is too small for .*v\.model: .* at least \d{3}"):
        train_vocabulary(TRAINING_TEXT[:9], str(tmp_path / "v.model"), vocab_size=40)
    assert not os.path.exists(tmp_path / "v.model")


def test_fingerprint_tells_same_size_vocabularies_apart(vocabulary, tmp_path):
    """A vocabulary trained on other text has the same size (it is configured) but other pieces."""
    other = train_vocabulary([line.upper() for line in TRAINING_TEXT], str(tmp_path / "other.model"), vocab_size=320)
    assert other.vocab_size == vocabulary.vocab_size
    assert other.fingerprint != vocabulary.fingerprint
    assert Vocabulary(vocabulary.model_path).fingerprint == vocabulary.fingerprint  # the file, not the object
    assert SymbolVocabulary(10).fingerprint != SymbolVocabulary(11).fingerprint


def test_missing_vocabulary_says_how_to_create_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="t2t-datagen"):
        Vocabulary(str(tmp_path / "vocab.nothing.model"))
    assert not os.path.exists(tmp_path / "vocab.nothing.model")


@pytest.mark.parametrize("damage", ["cut in half", "empty", "garbage"])
def test_a_damaged_vocabulary_is_named_with_what_to_do(vocabulary, tmp_path, damage):
    """SentencePiece says only "INTERNAL: ... ParseFromArray"; every tool stops on this error in one line."""
    with open(vocabulary.model_path, "rb") as file:
        model = file.read()
    damaged = {"cut in half": model[: len(model) // 2], "empty": b"", "garbage": b"not a model\n" * 40}[damage]
    path = tmp_path / "vocab.test.model"
    path.write_bytes(damaged)
    with pytest.raises(DamagedVocabularyError, match=f"Vocabulary {path} .* is not a SentencePiece model") as error:
        Vocabulary(str(path))
    assert "Restore it from a copy" in str(error.value) and "t2t-datagen with --overwrite" in str(error.value)
    assert isinstance(error.value, FileNotFoundError)  # what the tools catch for a missing vocabulary


def test_symbol_vocabulary_in_python_and_in_graph():
    vocabulary = SymbolVocabulary(10)
    assert vocabulary.vocab_size == 12
    assert vocabulary.encode("3 1 4") == [5, 3, 6]
    assert vocabulary.decode([5, 3, 6, EOS_ID, 7, PAD_ID]) == "3 1 4"
    ids = vocabulary.tokenizer.tokenize(tf.constant(["3 1 4", "9"]))
    assert ids.to_list() == [[5, 3, 6], [11]]
    padded = tf.constant([[5, 3, 6, EOS_ID], [11, EOS_ID, 0, 0]])
    assert vocabulary.tokenizer.detokenize(padded).numpy().tolist() == [b"3 1 4", b"9"]
    with pytest.raises(ValueError, match="not a symbol"):
        vocabulary.encode("3 10")
