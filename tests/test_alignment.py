"""Word alignments: subwords merged into the raw text's words by hand-written cases, and a trained tiny model's
links on algorithmic_reverse and algorithmic_identity equal to the reversal and the identity, the truth there.

The merge cases use a SentencePiece vocabulary trained here (multi-piece words, punctuation written against
words, characters spelled as bytes after a bare "▁") and attention weights written by hand, so each expected
link is read off the weights, not off the code. The trained models (two layers, two heads) are trained once
per test run (`built_once`) for a few hundred Adam steps; their test split was never trained on.
"""

import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.data import vocabulary as vocabulary_lib
from t2t_lite.decode import alignment, model_loading, scoring
from t2t_lite.decode.alignment import AlignmentSettings
from t2t_lite.decode.decode_settings import DecodeHParams, decode_hparams
from t2t_lite.decode.encoded_inputs import pad_batch
from t2t_lite.decode.translation import translate
from t2t_lite.hparam import HParamsError
from t2t_lite.run_dir import checkpoints, model_info

EOS = vocabulary_lib.EOS_ID
SMALL = "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=2,layer_prepostprocess_dropout=0.0"
TRAIN_STEPS = {"algorithmic_reverse": 400, "algorithmic_identity": 300}
TEXTS = [
    "Hello, world! The cat's toy is unbelievable.",
    "der Hund läuft schnell über die Straße",
    "a ☃ snowman (unbelievably) cold",
    "3.14 is π; “quoted” text",
]


# -- The merge, by hand ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory):
    path = tmp_path_factory.mktemp("alignment_vocabulary") / "vocab.model"
    sentences = ["the cat runs quickly over the green street", "der hund läuft schnell über die straße"] * 40
    return vocabulary_lib.train_vocabulary(sentences + TEXTS, str(path), 320)


def pieces(vocabulary, text):
    return [vocabulary._processor.id_to_piece(index) for index in vocabulary.encode(text)]


def word_of_each_id(vocabulary, ids):
    return alignment.word_indices(np.array([ids]), *vocabulary.word_pieces()).numpy()[0].tolist()


@pytest.mark.parametrize("text", TEXTS)
def test_the_words_of_a_text_are_its_whitespace_separated_words_punctuation_included(vocabulary, text):
    ids = vocabulary.encode(text)
    words = word_of_each_id(vocabulary, ids + [EOS, 0])
    assert words[-2:] == [-1, -1]  # EOS and padding belong to no word
    spelled = [vocabulary.decode([i for i, word in zip(ids, words) if word == k]) for k in range(max(words) + 1)]
    assert spelled == text.split()


def test_a_bare_word_mark_before_bytes_begins_their_word_and_the_first_piece_always_begins_one(vocabulary):
    assert pieces(vocabulary, "a ❄")[-4:] == ["▁", "<0xE2>", "<0x9D>", "<0x84>"]
    assert word_of_each_id(vocabulary, vocabulary.encode("a ❄"))[-4:] == [1, 1, 1, 1]
    continuation = vocabulary.encode("cat")[-1:]  # a piece without "▁", first in its text
    assert word_of_each_id(vocabulary, continuation + vocabulary.encode("the"))[:2] == [0, 1]


def test_a_bare_word_mark_with_no_piece_of_its_word_after_it_joins_the_word_before(vocabulary):
    bare = vocabulary._processor.piece_to_id("▁")
    the, cat = vocabulary.encode("the"), vocabulary.encode("cat")
    assert word_of_each_id(vocabulary, the + [bare] + cat + [bare, EOS]) == (
        [0] * len(the) + [0] + [1] * len(cat) + [1, -1]
    )


def one_hot_attention(rows, source_length):
    """A(t, s) with all of target subword t's weight on source subword rows[t]."""
    return np.eye(source_length, dtype=np.float32)[rows][None]


def links_of(vocabulary, weights, source_ids, target_ids):
    links = alignment.word_links(weights, np.array([source_ids]), np.array([target_ids]), *vocabulary.word_pieces())
    return alignment.pharaoh(links).numpy()[0].decode()


def test_multi_piece_words_are_linked_as_words_in_target_order(vocabulary):
    source = vocabulary.encode("unbelievable cats") + [EOS]
    target = vocabulary.encode("cats unbelievable") + [EOS]
    first, second = len(vocabulary.encode("unbelievable")), len(vocabulary.encode("cats"))
    assert first > 1 and second > 1
    # Each target piece looks at one piece of the other word, the target EOS at the source EOS.
    rows = [first + (t % second) for t in range(second)] + [t % first for t in range(first)] + [first + second]
    assert links_of(vocabulary, one_hot_attention(rows, len(source)), source, target) == "1-0 0-1"


def test_a_source_word_gathers_the_weight_of_all_its_pieces_and_the_source_eos_takes_part_in_nothing(vocabulary):
    source = vocabulary.encode("unbelievable cat") + [EOS]
    long_word = len(vocabulary.encode("unbelievable"))
    target = vocabulary.encode("x") + [EOS]
    weights = np.zeros((1, len(target), len(source)), np.float32)
    # 0.3 spread over the pieces of word 0 beats 0.2 on word 1; the 0.5 on the source EOS is no word's.
    weights[0, :, :long_word] = 0.3 / long_word
    weights[0, :, long_word:-1] = 0.2 / (len(source) - 1 - long_word)
    weights[0, :, -1] = 0.5
    assert links_of(vocabulary, weights, source, target) == "0-0"
    weights[0, :, long_word:-1] = 0.35 / (len(source) - 1 - long_word)
    assert links_of(vocabulary, weights, source, target) == "1-0"


def test_punctuation_written_against_a_word_is_part_of_it(vocabulary):
    source = vocabulary.encode("Hello, world!") + [EOS]
    target = vocabulary.encode("world! Hello,") + [EOS]
    source_words = word_of_each_id(vocabulary, source)
    target_words = word_of_each_id(vocabulary, target)
    # Every piece of target word w looks at the source piece of the same word (the text swaps them).
    rows = [source_words.index(1 - w) if w >= 0 else len(source) - 1 for w in target_words]
    assert links_of(vocabulary, one_hot_attention(rows, len(source)), source, target) == "1-0 0-1"


def test_an_empty_translation_has_no_links_and_every_word_of_a_longer_target_has_one(vocabulary):
    source = vocabulary.encode("cat") + [EOS]
    assert links_of(vocabulary, np.full((1, 1, len(source)), 1 / len(source), np.float32), source, [EOS]) == ""
    target = vocabulary.encode("the green cat runs") + [EOS]
    uniform = np.full((1, len(target), len(source)), 1 / len(source), np.float32)
    assert links_of(vocabulary, uniform, source, target) == "0-0 0-1 0-2 0-3"
    assert links_of(vocabulary, uniform[:, :, -1:], [EOS], target) == ""  # a source without words


# -- Trained models where the truth is known ----------------------------------------------------
def padded_examples(examples):
    return pad_batch([inputs for inputs, _ in examples]), pad_batch([targets for _, targets in examples])


def train_task(problem_name, steps, path):
    """transformer_tiny at SMALL, trained `steps` Adam steps of 64 pairs on the problem's train examples."""
    problem = registry.problem(problem_name)
    hparams = registry.hparams("transformer_tiny").override(SMALL)
    state = random.getstate()
    keras.utils.set_random_seed(1)
    model = model_info.build_model(hparams, problem.vocabulary("").vocab_size)
    random.setstate(state)
    examples = list(problem.examples("train"))[:4000]
    optimizer = keras.optimizers.Adam(3e-3)

    @tf.function
    def step(inputs, targets):
        with tf.GradientTape() as tape:
            logits = model({"inputs": inputs, "targets": targets}, training=True)
            losses = keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True)
            weights = tf.cast(targets != 0, tf.float32)
            loss = tf.reduce_sum(losses * weights) / tf.reduce_sum(weights)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    for i in range(steps):
        first = (i * 64) % len(examples)
        step(*padded_examples(examples[first : first + 64]))
    checkpoint = tf.train.Checkpoint(model=checkpoints.trackable_model(model))
    checkpoints.checkpoint_manager(checkpoint, str(path), 1).save(steps)
    model_info.write_model_info(str(path), hparams, problem.name, "transformer", model.vocab_size)


@pytest.fixture(scope="session", params=sorted(TRAIN_STEPS))
def trained(request, built_once):
    """(problem, hparams, model) of a tiny model trained on algorithmic_reverse or algorithmic_identity."""
    name = request.param
    path = built_once(f"alignment_{name}", lambda path: train_task(name, TRAIN_STEPS[name], path))
    problem, hparams = registry.problem(name), registry.hparams("transformer_tiny").override(SMALL)
    return problem, hparams, model_loading.load_model_for_decoding(problem, hparams, "", str(path))


def true_links(problem, inputs):
    """The permutation of the task: word i of the target is word n-1-i (reverse) or i (identity) of the source."""
    n = len(inputs) - 1
    reverse = problem.name == "algorithmic_reverse"
    return {f"{n - 1 - i if reverse else i}-{i}" for i in range(n)}


def share_of_true_links(problem, examples, links):
    found = [len(true_links(problem, inputs) & set(text.split())) for (inputs, _), text in zip(examples, links)]
    return sum(found) / sum(len(inputs) - 1 for inputs, _ in examples)


def test_the_default_alignment_of_held_out_pairs_is_the_task_permutation(trained):
    problem, _, model = trained
    examples = list(problem.examples("test"))[:200]
    links = alignment.pair_alignments(model, problem.vocabulary(""), *padded_examples(examples), AlignmentSettings())
    assert share_of_true_links(problem, examples, links) >= 0.95


def test_decoded_translations_carry_the_links_of_their_pair_for_every_beam(trained):
    problem, _, model = trained
    vocabulary = problem.vocabulary("")
    examples = list(problem.examples("test"))[:40]
    lines = [vocabulary.decode(inputs) for inputs, _ in examples]
    settings = DecodeHParams.of(beam_size=3, alpha=0.6, extra_length=2, return_beams=True, write_alignment=True)
    translations = translate(model, vocabulary, lines, settings, progress=False)
    for translation in translations:
        fields = translation.line(return_beams=True).split("\t")
        assert len(fields) == 2 * len(translation.hypotheses)
        for text, field, links in zip(translation.hypotheses, fields[::2], translation.alignments):
            assert field == f"{text} ||| {links}"
            pairs = [tuple(map(int, link.split("-"))) for link in links.split()]
            assert [target for _, target in pairs] == list(range(len(text.split())))
            assert all(0 <= source < len(translation.source.split()) for source, _ in pairs)
    best = [translation.alignments[0] for translation in translations]
    assert share_of_true_links(problem, examples, best) >= 0.95


def test_score_file_pairs_and_prefixed_translations_get_the_links_of_the_whole_pair(trained):
    problem, _, model = trained
    vocabulary = problem.vocabulary("")
    pairs = [("3 1 4 1 5", "5 1 4 1 3"), ("2 7", "7 2 7 2")]  # the second: a target longer than its source
    settings = DecodeHParams.of(write_alignment=True)
    scores = scoring.score_pairs(model, vocabulary, pairs, settings)
    if problem.name == "algorithmic_reverse":
        assert scores[0].alignment == "4-0 3-1 2-2 1-3 0-4"
    else:
        assert set(scores[0].alignment.split()) & {"0-0", "4-4"} == {"0-0", "4-4"}  # the ends of a copy
    assert scores[0].line(per_token=False) == f"{scores[0].log_probability:.6f} ||| {scores[0].alignment}"
    assert [int(link.split("-")[1]) for link in scores[1].alignment.split()] == [0, 1, 2, 3]
    greedy = DecodeHParams.of(beam_size=1, write_alignment=True)
    prefixed = translate(model, vocabulary, ["3 1 4 1 5"], greedy, prefixes=["9 9"], progress=False)[0]
    text = prefixed.hypotheses[0]
    assert text.startswith("9 9 ")
    given = scoring.score_pairs(model, vocabulary, [("3 1 4 1 5", text)], settings)[0]
    assert prefixed.alignments[0] == given.alignment


def test_the_last_layer_aligns_the_reversal_better_than_the_first(trained):
    """The measurement behind alignment_layer=-1 (docs/results.md): on these two-layer models the first layer's
    encoder-decoder attention is far from the permutation, the last one's (all heads) is it."""
    problem, _, model = trained
    examples = list(problem.examples("test"))[:200]
    inputs, targets = padded_examples(examples)
    word_pieces = problem.vocabulary("").word_pieces()

    def share(layer, heads):  # eagerly: four small passes cost less than four traces
        links = alignment.alignments(model, inputs, targets, AlignmentSettings(True, layer, heads), word_pieces)
        return share_of_true_links(problem, examples, [text.decode() for text in links.numpy()])

    share = {(layer, heads): share(layer, heads) for layer in (0, 1) for heads in (0, 1)}
    print(problem.name, {key: round(value, 3) for key, value in share.items()})
    assert share[(1, 0)] == max(share.values())


@pytest.mark.parametrize(
    "overrides, message",
    [
        ("alignment_layer=2", "alignment_layer=2: the decoder has 2 layers; give 0..1, or -1..-2"),
        ("alignment_layer=-3", "alignment_layer=-3: the decoder has 2 layers"),
        ("alignment_heads=3", "alignment_heads=3: each layer has 2 heads; give 1..2, or 0 for all"),
        ("alignment_heads=-1", "alignment_heads=-1: the number of heads to average"),
    ],
)
def test_a_layer_or_head_count_the_model_lacks_is_refused_naming_the_flag(overrides, message):
    hparams = registry.hparams("transformer_tiny").override(SMALL)
    with pytest.raises(HParamsError, match="^--decode_hparams: " + message.replace("(", r"\(").replace(".", r"\.")):
        decode_hparams(hparams, registry.problem("algorithmic_reverse"), overrides)
