"""Guided alignment (Garg et al. 2019): the loss against a hand computation, its hparams and errors, the links
through the input pipeline, and a tiny model whose supervised head learns algorithmic_reverse's reversal.

The reversal is the truth there: target symbol i is source symbol n-1-i, so the training links are written
by hand (one piece per symbol) and the supervised head's attention on them is measured on the dev split.
"""

import math
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.data import datagen, input_pipeline
from t2t_lite.decode.decode_settings import decode_hparams
from t2t_lite.hparam import HParamsError
from t2t_lite.run_dir import model_info
from t2t_lite.serve.export_settings import export_settings
from t2t_lite.train import guided_alignment, schedule, train_step, trainer

SMALL = (
    "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=2,batch_size=256,learning_rate_warmup_steps=10,"
    "layer_prepostprocess_dropout=0.0"
)


def tiny(overrides=""):
    return registry.hparams("transformer_tiny").override(SMALL).override(overrides)


# -- The loss, by hand ------------------------------------------------------------------------
def test_the_loss_is_the_cross_entropy_of_the_row_normalised_links_under_the_attention():
    attention = np.array(
        [[[0.7, 0.1, 0.1, 0.1], [0.2, 0.2, 0.5, 0.1], [0.25, 0.25, 0.25, 0.25]]], np.float32
    )  # 3 target subwords over 4 source subwords
    links = np.zeros((1, 3, 4), bool)
    links[0, 0, 0] = True  # target 0 <- source 0
    links[0, 1, 1] = links[0, 1, 2] = True  # target 1 <- sources 1 and 2: half of G's row each
    # target 2 (say EOS) has no link and no loss, however its attention looks
    expected = -math.log(0.7) - 0.5 * math.log(0.2) - 0.5 * math.log(0.5)
    loss = guided_alignment.alignment_loss_sum(tf.constant(attention), tf.constant(links))
    assert float(loss) == pytest.approx(expected, rel=1e-6)


def test_the_supervised_attention_is_the_chosen_layers_first_heads_averaged():
    layer_0 = np.array([[[[0.9, 0.1]], [[0.3, 0.7]]]], np.float32)  # [batch 1, heads 2, 1 target, 2 sources]
    attention = {"encoder_decoder": [tf.constant(layer_0), tf.constant(1 - layer_0)]}
    one_head = guided_alignment.supervised_attention(attention, tiny("guided_alignment_weight=1"))
    np.testing.assert_allclose(one_head.numpy(), [[[0.9, 0.1]]])  # layer -2 of 2 is layer 0
    both = tiny("guided_alignment_weight=1,guided_alignment_layer=1,guided_alignment_heads=2")
    np.testing.assert_allclose(guided_alignment.supervised_attention(attention, both).numpy(), [[[0.4, 0.6]]])


# -- hparams --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, message",
    [
        ("guided_alignment_weight=-0.1", r"guided_alignment_weight=-0.1: must be a finite number ≥ 0"),
        ("guided_alignment_weight=inf", r"guided_alignment_weight=inf: must be a finite number ≥ 0"),
        ("guided_alignment_weight=0.05,guided_alignment_layer=2", r"guided_alignment_layer=2: the decoder has 2"),
        ("guided_alignment_weight=0.05,guided_alignment_heads=3", r"guided_alignment_heads=3: each layer has 2"),
        ("guided_alignment_weight=0.05,guided_alignment_heads=0", r"guided_alignment_heads=0: each layer has 2"),
    ],
)
def test_a_weight_below_zero_or_heads_the_model_lacks_are_refused_naming_the_hparam(overrides, message):
    with pytest.raises(HParamsError, match=message):
        tiny(overrides)


def test_guidance_is_off_in_every_set_and_its_heads_are_only_checked_when_it_is_on():
    assert all(registry.hparams(name).guided_alignment_weight == 0 for name in registry.list_hparams())
    one_layer = registry.hparams("transformer_tiny").override("num_hidden_layers=1")
    assert one_layer.guided_alignment_layer == -2  # off: the missing penultimate layer is no error


def test_a_guided_model_aligns_with_its_supervised_heads_unless_the_flag_names_others():
    problem = registry.problem("algorithmic_reverse")
    guided = tiny("guided_alignment_weight=0.05")
    assert decode_hparams(guided, problem).alignment.alignment_layer == -2
    assert decode_hparams(guided, problem).alignment.alignment_heads == 1
    assert export_settings(guided, problem).alignment.alignment_heads == 1
    given = decode_hparams(guided, problem, "alignment_layer=-1,alignment_heads=0").alignment
    assert (given.alignment_layer, given.alignment_heads) == (-1, 0)
    unguided = decode_hparams(tiny(), problem).alignment
    assert (unguided.alignment_layer, unguided.alignment_heads) == (-1, 0)


# -- Aligned data -----------------------------------------------------------------------------------
def reversal_links(inputs):
    """Flat subword links (s, t) of algorithmic_reverse: target t is source n-1-t; EOS (position n) has none."""
    n = len(inputs) - 1
    return [value for source in range(n) for value in (source, n - 1 - source)]


@pytest.fixture(scope="session")
def aligned_reverse_data(reverse_data, built_once):
    """reverse_data's pairs, their training records with the reversal as links (dev and test copied)."""

    def build(path):
        problem = registry.problem("algorithmic_reverse")
        examples = [
            (example["inputs"].tolist(), example["targets"].tolist(), reversal_links(example["inputs"].tolist()))
            for example in problem.dataset("train", reverse_data, shuffle_files=False).as_numpy_iterator()
        ]
        datagen.write_shuffled_shards(examples, str(path), problem.base_name, "train", 2, "aligned reverse")
        for split in ("dev", "test"):
            for name in datagen.complete_shards(reverse_data, problem.base_name, split):
                shutil.copy(name, str(path))

    return str(built_once("algorithmic_reverse_aligned", build))


def true_link_matrix(inputs, targets):
    """bool [len(targets), len(inputs)] of `reversal_links`, padding positions False."""
    matrix = np.zeros((len(targets), len(inputs)), bool)
    n = int(np.flatnonzero(np.asarray(inputs) == 1)[0])
    for source in range(n):
        matrix[n - 1 - source, source] = True
    return matrix


def in_file_order(data_dir, hparams):
    """One pass over the training batches in file order: both stages of the bucketing, and the padding to bucket
    shapes under XLA."""
    problem = registry.problem("algorithmic_reverse")
    dataset = input_pipeline.batched_dataset(problem, "train", data_dir, hparams, shuffle=False, repeat=False)
    return list(dataset.as_numpy_iterator())


# Each new pipeline costs a second or two of tf.data's start-up: the tests that only read these share them.
@pytest.fixture(scope="module")
def aligned_batches(aligned_reverse_data):
    """The guided training batches (no XLA) of one pass in file order."""
    return in_file_order(aligned_reverse_data, tiny("guided_alignment_weight=1"))


@pytest.mark.parametrize("xla", [False, True])
def test_training_batches_carry_each_rows_links_padded_as_its_sides(aligned_reverse_data, aligned_batches, xla):
    plain = in_file_order(aligned_reverse_data, tiny(f"xla_compile={xla}"))
    if xla:
        aligned = in_file_order(aligned_reverse_data, tiny(f"guided_alignment_weight=1,xla_compile={xla}"))
    else:
        aligned = aligned_batches
    for batch, unaligned in zip(aligned, plain, strict=True):
        np.testing.assert_array_equal(batch["inputs"], unaligned["inputs"])  # the links change no batch
        np.testing.assert_array_equal(batch["targets"], unaligned["targets"])
        assert batch["alignment"].shape == batch["targets"].shape + batch["inputs"].shape[1:]
        for inputs, targets, links in zip(batch["inputs"], batch["targets"], batch["alignment"]):
            if inputs.any():  # rows added under XLA are padding, with no link
                np.testing.assert_array_equal(links, true_link_matrix(inputs, targets))
            else:
                assert not links.any()


def test_guidance_without_aligned_shards_stops_naming_the_hparam_and_the_datagen_flag(reverse_data):
    with pytest.raises(ValueError, match=r"guided_alignment_weight=0.05 .* t2t-datagen --train_alignments=FILE"):
        guided_alignment.check_data(
            registry.problem("algorithmic_reverse"), reverse_data, tiny("guided_alignment_weight=0.05")
        )
    guided_alignment.check_data(registry.problem("algorithmic_reverse"), reverse_data, tiny())  # off: no check


# -- The training step ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def a_batch(aligned_batches):
    """The first guided training batch in file order, as tensors."""
    return {name: tf.constant(values) for name, values in aligned_batches[0].items()}


@pytest.mark.parametrize("xla", [False, True])
def test_the_step_adds_weight_times_the_alignment_loss_to_the_cross_entropy_and_nothing_to_the_nll(a_batch, xla):
    batch = a_batch
    keras.utils.set_random_seed(2)
    model = registry.model("transformer")(tiny(), registry.problem("algorithmic_reverse").vocab_size(""))
    plain = train_step._loss_sums(model, batch, tiny(f"xla_compile={xla}"))
    guided = train_step._loss_sums(model, batch, tiny(f"guided_alignment_weight=0.3,xla_compile={xla}"))
    _, attention = model({"inputs": batch["inputs"], "targets": batch["targets"]}, training=True, return_attention=True)
    weights = attention["encoder_decoder"][0].numpy()[:, 0]  # layer -2 of 2, head 0
    links = batch["alignment"].numpy().astype(np.float64)
    rows = links.sum(axis=-1, keepdims=True)
    by_hand = -np.sum(np.where(links, links / np.maximum(rows, 1) * np.log(np.maximum(weights, 1e-30)), 0.0))
    assert float(guided[0]) == pytest.approx(float(plain[0]) + 0.3 * by_hand, rel=1e-5)
    assert float(guided[1]) == pytest.approx(float(plain[1]), rel=1e-6)  # NLL: the translation's alone
    assert float(guided[2]) == float(plain[2])  # the same |T| divides both terms


def test_the_guided_step_compiles_under_xla(a_batch):
    batch = a_batch
    hparams = tiny("guided_alignment_weight=1,xla_compile=true,num_hidden_layers=1,guided_alignment_layer=0")
    model = registry.model("transformer")(hparams, registry.problem("algorithmic_reverse").vocab_size(""))
    compiled = tf.function(train_step._gradients, jit_compile=True, autograph=False)
    gradients, sums = compiled(model, keras.optimizers.Adam(), batch, hparams, 1.0)
    assert np.isfinite(sums.numpy()).all() and all(np.isfinite(g.numpy()).all() for g in gradients)


# -- Learning the reversal --------------------------------------------------------------------------
def reversal_mass(model, batch):
    """Mean attention of the supervised head (layer 0, head 0) on the true source of each dev target symbol."""
    _, attention = model.decoder_hidden(batch, return_attention=True)
    weights = attention["encoder_decoder"][0].numpy()[:, 0]
    truth = np.stack([true_link_matrix(i, t) for i, t in zip(batch["inputs"], batch["targets"])])
    return float((weights * truth).sum() / truth.sum())


def trained_for(problem, data_dir, hparams, steps):
    """A model after `steps` of the trainer's step functions (seed 3), its batches read in file order."""
    keras.utils.set_random_seed(3)
    model = model_info.build_model(hparams, problem.vocab_size(data_dir))
    optimizer = schedule.adam_optimizer(hparams, steps)
    optimizer.build(model.trainable_variables)
    functions = train_step.StepFunctions(model, optimizer, hparams, tf.distribute.get_strategy())
    # No shuffle: the trainer's buffer would first fill with ten passes over these 1,000 pairs.
    batches = input_pipeline.batched_dataset(problem, "train", data_dir, hparams, shuffle=False, repeat=True)
    for batch in batches.take(steps):
        functions.train_step(batch)
    return model


def test_guidance_moves_the_supervised_head_onto_the_given_links(aligned_reverse_data):
    """40 updates of 256 tokens: the supervised head's weight on the reversal rises well above the unguided
    model's (0.16 to 0.33 measured; the dev split was never trained on)."""
    problem = registry.problem("algorithmic_reverse")
    # Dev batches carry no links, whatever the weight: both models are measured on the same first one.
    dev = next(input_pipeline.batched_dataset(problem, "dev", aligned_reverse_data, tiny()).as_numpy_iterator())
    mass = {}
    for weight in (0.0, 1.0):
        hparams = tiny(f"guided_alignment_weight={weight}")
        mass[weight] = reversal_mass(trained_for(problem, aligned_reverse_data, hparams, 40), dev)
    print("attention on the reversal, unguided and guided:", mass)
    assert mass[1.0] > mass[0.0] + 0.08


def test_the_trainer_trains_with_guidance_from_aligned_shards(aligned_reverse_data, tmp_path):
    """The whole run: the data check, each replica's pipeline with its end marker, the step, the checkpoint."""
    lines = []
    # One layer, its own supervised (the default penultimate one needs two): every stage of the run is the same,
    # and the trainer traces half the layers.
    hparams = tiny("guided_alignment_weight=0.5,num_hidden_layers=1,guided_alignment_layer=0")
    trainer.train_and_evaluate(
        registry.problem("algorithmic_reverse"),
        hparams,
        aligned_reverse_data,
        str(tmp_path / "train"),
        train_steps=2,
        schedule="train",
        summary_steps=1,
        random_seed=3,
        log=lines.append,
    )
    losses = [float(line.split("loss ")[1].split()[0]) for line in lines if line.startswith("step ")]
    assert len(losses) == 2 and all(math.isfinite(value) for value in losses)
