"""t2t_lite measured exactly as the peers' harness measures its peers: one JSON line in their schema.

    .venv/bin/python bench/peer_project.py --preset base [--xla] [--activation_dtype bfloat16] [--out FILE]
    .venv/bin/python bench/peer_project.py --preset base --savedmodel       # the exported SavedModel, decode only
    .venv/bin/python bench/peer_project.py --preset tiny --savedmodel --savedmodel_ids_only  # translate_ids alone
    .venv/bin/python bench/peer_project.py --preset base --xla --quantize int8 --skip-train   # int8 products
    .venv/bin/python bench/peer_project.py --preset base --xla --quantize bfloat16 --skip-train   # bfloat16 weights
    .venv/bin/python bench/peer_project.py --preset base --ctranslate2 int8  # our model converted to CTranslate2
    .venv/bin/python bench/peer_project.py --preset base --memory train     # peak RSS of one step
    .venv/bin/python bench/peer_project.py --preset base --memory decode    # peak RSS of beam-4 decoding
    .venv/bin/python bench/peer_project.py --preset base --matmul_bound [--xla]  # the step's products alone

The presets, random batches, warm-up and timing protocol, thread settings and the JSON
schema all come from the peers' own `peer_common.py` (found as ../shared/peers beside the
checkout, or --peers_dir), so the figures sit beside theirs
(`bench/compare_peers.py` runs everything; run_all.sh's `EXTRA=project=...` hook works too).
What is timed is what a user gets:
  * training: `train_step.StepFunctions.train_step` (forward, the label-smoothed loss of
    loss.py, backward, Adam on eq. 3 from schedule.py) on transformer_tiny / transformer_base
    with the preset's vocabulary; `--xla` sets hparams xla_compile=True;
  * decoding: `batch_decoding.decode_batch` with the KV cache, greedy and beam 4 (α = 0.6),
    eos_id=-1 so every sentence runs to 20 + extra_length = 30 tokens, as the peers do;
    `--xla` compiles the whole search (`decode_batch(xla=True)`, a preallocated cache);
  * `--activation_dtype bfloat16` sets the hparam of that name (mixed precision) for both;
  * `--quantize int8` / `--quantize bfloat16` decodes with t2t_lite/decode/quantization.py's int8
    products or bfloat16 product weights (what `--decode_hparams=quantize=...` gives
    t2t-decoder and t2t-exporter), converted from the same random float32 weights; decoding
    only (training never is), so give --skip-train; with --savedmodel, that export;
  * `--savedmodel`: the model exported by export.py's `serving_module` and `write_saved_model`
    (what t2t-exporter writes, minus the checkpoint), loaded with tf.saved_model.load, its
    `translate_ids` signature called on the same ids, one export for greedy and one for beam
    4; with XLA decoding when the export's SearchSettings has an `xla` setting. That signature
    appends EOS to each row (21 ids, one more than the peers read) and decodes with EOS
    fixed, so the row reaches 30 tokens through extra_length = 9 and weights under which
    EOS is never chosen (`without_eos`); it checks that every hypothesis has 30 tokens and
    equals `batch_decoding.decode_batch` on the same model. `--savedmodel_ids_only` saves that
    signature alone (no other signature, asset or warm-up file): the same search, checked the
    same way, without tracing and loading the signatures the row never calls (a quicker check);
  * `--ctranslate2 float32|int8`: the same model converted by t2t_lite/serve/ctranslate2_export.py
    (what `t2t-exporter --export_format=ctranslate2` writes, minus the checkpoint; the float32
    weights as trained, loaded with that compute_type) and decoded by CTranslate2's
    `Translator.translate_batch` on the same ids as pieces, CTranslate2 appending EOS (21 ids, as the
    SavedModel reads), max_decoding_length 30, min_decoding_length 0, under `without_eos` weights;
    it checks that every hypothesis has 30 tokens and reports the share equal to `decode_batch`'s.
Achieved FLOP/s = flops.flops_per_step(hparams, vocab, batch × 32, 32) ÷ step time.

`--memory train|decode` skips the timing protocol and reports the process's peak resident
memory (VmHWM of /proc/self/status): `train` runs the set's real update at a micro-batch
of `--memory_tokens` target tokens (transformer_base: 4,096 tokens, accumulated towards
tokens_per_step = 25,000, so two accumulate steps and one apply step), `decode` one
beam-4 decoding call of the preset's 32 sentences.

`--matmul_bound [--xla]` skips it too and times, with bench/matmul_peak.py, the matrix products
the preset's training step is made of (TensorFlow's oneDNN kernels, or XLA's with --xla):
`matmul_only_flops_per_s` is the FLOP/s of a step that did nothing but those products.
"""

import argparse
import dataclasses
import json
import os
import random
import sys
import tempfile

from compare_peers import PeersNotFoundError, find_peers_dir

from t2t_lite import cpu_features


def _import_peer_common():
    """peer_common sets the thread environment, so it is imported before TensorFlow."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--peers_dir", default=None)
    try:
        peers_dir = find_peers_dir(parser.parse_known_args()[0].peers_dir)
    except PeersNotFoundError as error:
        sys.exit(f"bench/peer_project.py: {error}")
    sys.path.insert(0, peers_dir)
    import peer_common

    return peer_common


pc = _import_peer_common()
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
cpu_features.use_onednn_kernels()  # the kernels the t2t-* tools run (TensorFlow reads this when it loads)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(pc.NUM_THREADS)
tf.config.threading.set_inter_op_parallelism_threads(pc.NUM_THREADS)

import matmul_peak  # noqa: E402  (bench/, this script's folder)

import t2t_lite  # noqa: E402
from t2t_lite import registry  # noqa: E402
from t2t_lite.data import vocabulary
from t2t_lite.decode import batch_decoding, beam_search, quantization
from t2t_lite.decode.search_settings import SearchSettings
from t2t_lite.run_dir import model_info
from t2t_lite.serve import ctranslate2_export, export
from t2t_lite.serve.export_settings import ExportSettings
from t2t_lite.train import flops, train_step
from t2t_lite.train.schedule import adam_optimizer  # noqa: E402

HPARAMS_SETS = {"tiny": "transformer_tiny", "base": "transformer_base"}
NO_EOS = -1  # no id equals it, so nothing stops early (the peers' protocol)


# -- The preset as HParams --------------------------------------------------------------
def preset_hparams(cfg, xla: bool, activation_dtype: str = "float32"):
    """The registered set with the preset's shape; fails if the set and the peers' preset disagree."""
    hparams = registry.hparams(HPARAMS_SETS[cfg["preset"]])
    expected = {
        "num_encoder_layers": (hparams.encoder_layers, cfg["num_encoder_layers"]),
        "num_decoder_layers": (hparams.decoder_layers, cfg["num_decoder_layers"]),
        "d_model": (hparams.hidden_size, cfg["d_model"]),
        "num_heads": (hparams.num_heads, cfg["num_heads"]),
        "d_ff": (hparams.filter_size, cfg["d_ff"]),
        "dropout": (hparams.layer_prepostprocess_dropout, cfg["dropout"]),
        "label_smoothing": (hparams.label_smoothing, cfg["label_smoothing"]),
        "shared_embeddings": (hparams.shared_embedding_and_softmax_weights, cfg["shared_embeddings"]),
        "sinusoids": (hparams.pos, "timing"),
    }
    wrong = {name: pair for name, pair in expected.items() if pair[0] != pair[1]}
    if wrong:
        raise ValueError(
            f"{HPARAMS_SETS[cfg['preset']]} does not match peer_common.PRESETS[{cfg['preset']!r}]: "
            + ", ".join(f"{name} {ours} != {theirs}" for name, (ours, theirs) in wrong.items())
        )
    # One Adam update per batch, as every peer does (no accumulation towards tokens_per_step).
    return hparams.replace(
        batch_size=cfg["train_batch"] * cfg["tgt_len"],
        tokens_per_step=0,
        xla_compile=xla,
        activation_dtype=activation_dtype,
    )


def build(hparams, vocab_size, seed):
    keras.utils.set_random_seed(seed)
    model = model_info.build_model(hparams, vocab_size)
    optimizer = adam_optimizer(hparams)
    optimizer.build(model.trainable_variables)
    return model, train_step.StepFunctions(model, optimizer, hparams, tf.distribute.get_strategy())


def as_batch(source, targets):
    return {"inputs": tf.constant(source, tf.int32), "targets": tf.constant(targets, tf.int32)}


# -- The peers' protocol -----------------------------------------------------------------
def time_training(steps, hparams, cfg, seed):
    """pc.time_train on the real train step, plus the FLOP estimate and achieved FLOP/s."""
    batches = [as_batch(source, targets) for source, targets in pc.random_batches(cfg, seed=seed)]

    def step(batch):
        loss_sum, _, tokens = steps.train_step(batch).numpy()
        return loss_sum / tokens

    result = pc.time_train(step, batches, cfg)
    step_flops = flops.flops_per_step(hparams, cfg["vocab_size"], result["tgt_tokens_per_step"], cfg["tgt_len"])
    result["flops_per_step"] = step_flops
    result["flops_per_s"] = pc.summary([step_flops / seconds for seconds in result["step_s"]["values"]], nd=0)
    result["optimizer"] = (
        "t2t_lite.train.train_step.StepFunctions.train_step (FusedAdam, eq. 3 schedule, hand-written loss gradient)"
    )
    return result


def search_settings(cfg, beam_size, xla=False):
    # decode_length = the input's non-padding length + extra_length (beam_search.decode).
    return SearchSettings(
        beam_size=beam_size,
        alpha=cfg["beam_alpha"],
        extra_length=cfg["decode_max_out"] - cfg["decode_src_len"],
        xla=xla,
    )


def time_decoding(model, cfg, modes, xla=False):
    """pc.time_decode for greedy and/or beam 4, and the peers' greedy self-check."""
    source = pc.random_decode_src(cfg)
    results = {}
    beam_sizes = {"greedy": 1, "beam": cfg["beam_size"]}
    for name in modes:
        beam_size = beam_sizes[name]
        search = search_settings(cfg, beam_size, xla)
        pc.log(f"[t2t_lite {cfg['preset']}] {name} decoding ...")
        results[name] = pc.time_decode(
            lambda batch, search=search: batch_decoding.decode_batch(model, batch, search, eos_id=NO_EOS)[0],
            source,
            cfg,
            method=f"t2t_lite.decode.batch_decoding.decode_batch(beam_size={beam_size}, xla={xla}) (tf.function)",
            cached=True,
            beam_size=beam_size,
            alpha=cfg["beam_alpha"],
        )
        if results[name]["out_shape"] != [cfg["decode_sentences"], cfg["decode_max_out"]]:
            raise RuntimeError(
                f"{name} decoding returned {results[name]['out_shape']}, expected "
                f"{[cfg['decode_sentences'], cfg['decode_max_out']]} (see search_settings)."
            )
    if "greedy" not in results:
        return results
    output = batch_decoding.decode_batch(model, source, search_settings(cfg, 1, xla), eos_id=NO_EOS)[0]
    logits = model({"inputs": tf.constant(source, tf.int32), "targets": tf.constant(output)}, training=False)
    results["greedy"]["check_teacher_forced_argmax_match"] = round(
        float(np.mean(np.argmax(logits.numpy(), -1) == output)), 4
    )
    return results


# -- Peak memory ---------------------------------------------------------------------------
def peak_rss_mb() -> float:
    """VmHWM, the peak resident set size of this process so far, in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("/proc/self/status has no VmHWM line (not Linux?).")


def measure_memory(phase, cfg, micro_batch_tokens, seed):
    """Peak RSS of the set's real training update at `micro_batch_tokens`, or of one beam-4 decoding call."""
    hparams = registry.hparams(HPARAMS_SETS[cfg["preset"]]).replace(batch_size=micro_batch_tokens)
    model, steps = build(hparams, cfg["vocab_size"], seed)
    result = {"phase": phase, "peak_rss_after_build_mb": round(peak_rss_mb(), 1)}
    if phase == "train":
        rng = np.random.default_rng(seed)
        sentences = micro_batch_tokens // cfg["tgt_len"]
        batch = as_batch(
            *(rng.integers(pc.FIRST_REAL_ID, cfg["vocab_size"], size=(sentences, cfg["tgt_len"])) for _ in range(2))
        )
        k = train_step.micro_batches_per_step(hparams, num_replicas=1)
        if k > 1:
            steps.build_accumulators()
            for _ in range(2):  # the accumulators' size does not grow with k
                steps.accumulate_step(batch).numpy()
            steps.apply_step()
        else:
            steps.train_step(batch).numpy()
        result.update(
            micro_batch_tokens=sentences * cfg["tgt_len"],
            micro_batches_per_step=k,
            tokens_per_step=hparams.tokens_per_step,
        )
    else:
        source = pc.random_decode_src(cfg)
        batch_decoding.decode_batch(model, source, search_settings(cfg, cfg["beam_size"]), eos_id=NO_EOS)
        result.update(sentences=int(source.shape[0]), beam_size=cfg["beam_size"], out_tokens=cfg["decode_max_out"])
    result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return result


# -- The step's matrix products alone --------------------------------------------------------
def measure_matmul_bound(hparams, cfg, xla: bool, repeats: int = 5) -> dict:
    """matmul_peak.measure_step_shapes on the products of the preset's training step."""
    tokens = cfg["train_batch"] * cfg["tgt_len"]
    if cfg["src_len"] != cfg["tgt_len"]:
        raise ValueError(
            f"--matmul_bound assumes source and target batches of equal length; preset "
            f"{cfg['preset']!r} has src_len {cfg['src_len']}, tgt_len {cfg['tgt_len']}."
        )
    shapes = matmul_peak.step_shapes(hparams, cfg["vocab_size"], tokens)
    return dict(matmul_peak.measure_step_shapes(shapes, repeats, xla), tokens=tokens)


# -- The exported SavedModel ------------------------------------------------------------------
def without_eos(model):
    """Makes EOS the least likely token at every step, so the export's search never ends a hypothesis early.

    The export decodes with EOS fixed (its signatures take no eos_id), so the peers' "nothing
    stops early" is met through the random weights instead: the decoder's last LayerNorm gets
    γ = 1, β = 1 and EOS's row of the shared embedding is −1 in every feature. The decoder's
    output is then n + 1 with n of zero mean over the d_model features, so logit(EOS) =
    −d_model (−128 at tiny, −512 at base), while every other logit, E_k·n + ΣE_k with E_k
    drawn N(0, 1/d_model), is about N(0, 2).
    """
    last_norm = model.decoder.norm or model.decoder.stack[-1].feed_forward_residual.norm
    last_norm.gamma.assign(np.ones(last_norm.gamma.shape, np.float32))
    last_norm.beta.assign(np.ones(last_norm.beta.shape, np.float32))
    embeddings = model.softmax_weights.embeddings
    rows = embeddings.numpy()
    rows[beam_search.EOS_ID] = -1.0
    embeddings.assign(rows)


def made_up_vocabulary(path):
    """A small SentencePiece model for the export's text signature, which this row does not call."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 7))) for _ in range(300)]
    sentences = (" ".join(rng.choice(words) for _ in range(rng.randint(3, 20))) for _ in range(2000))
    return vocabulary.train_vocabulary(sentences, path, 500)


def export_as_peers_decode(model, hparams, cfg, beam_size, vocab, path, quantize="", ids_only=False):
    """Writes the SavedModel that decodes the peers' 20 ids to 30 tokens; returns whether it decodes with XLA.

    translate_ids appends EOS (21 ids), and a row may emit its input length + extra_length. `ids_only`: that
    signature alone (`save_translate_ids`), instead of everything t2t-exporter writes.
    """
    # max_input_length: the 21 ids it is given, so the XLA export compiles the buckets of length 16
    # and 24 only (the default 256 adds 32, 48, ... 256: minutes of tracing and GBs for shapes never used).
    xla = "xla" in {field.name for field in dataclasses.fields(SearchSettings)}  # the XLA export, where it has one
    settings = ExportSettings.of(
        beam_size=beam_size,
        alpha=cfg["beam_alpha"],
        extra_length=cfg["decode_max_out"] - cfg["decode_src_len"] - 1,
        max_input_length=cfg["decode_src_len"] + 1,
        quantize=quantize or "",
        **({"xla": True} if xla else {}),
    )
    config = {
        "bench": "bench/peer_project.py --savedmodel",
        "preset": cfg["preset"],
        "decode_hparams": dataclasses.asdict(settings),
        "hparams": json.loads(hparams.to_json()),
    }
    module = export.serving_module(model, vocab, settings)
    if ids_only:
        save_translate_ids(module, path)
    else:
        export.write_saved_model(module, config, vocab.model_path, export.warmup_requests(vocab, settings), path)
    return xla


def save_translate_ids(module, path):
    """The serving module's weights and translate_ids signature alone, saved as write_saved_model saves them.

    tf.saved_model.save traces every function a module holds, so the signatures the row never calls are left out
    of the module saved, not only of its signatures.
    """
    lean = tf.Module(name=module.name)
    lean.model_weights = module.model_weights
    lean.translate_ids = module.translate_ids
    tf.saved_model.save(lean, path, signatures={export.IDS_SIGNATURE: module.translate_ids})


def time_savedmodel(model, hparams, cfg, modes, scratch, quantize="", ids_only=False):
    """pc.time_decode of the export's translate_ids signature (one export per mode), each output checked.

    Returns ({mode: result}, whether the export decodes with XLA).
    """
    source = pc.random_decode_src(cfg)
    with_eos = np.concatenate([source, np.full([len(source), 1], beam_search.EOS_ID)], axis=1)
    vocab = made_up_vocabulary(os.path.join(scratch, "vocabulary.model"))
    beam_sizes, results, xla = {"greedy": 1, "beam": cfg["beam_size"]}, {}, False
    for name in modes:
        beam_size, path = beam_sizes[name], os.path.join(scratch, f"export_{name}")
        pc.log(f"[t2t_lite {cfg['preset']}] SavedModel export and {name} decoding ...")
        xla = export_as_peers_decode(model, hparams, cfg, beam_size, vocab, path, quantize, ids_only)
        translate_ids = tf.saved_model.load(path).signatures[export.IDS_SIGNATURE]
        last = []  # the ids of the latest call: the timed calls decode `source`, so the last one's are checked

        def call(batch):
            last[:] = [translate_ids(inputs=tf.constant(batch, tf.int32))["outputs"].numpy()]
            return last[0]

        results[name] = pc.time_decode(
            call,
            source,
            cfg,
            method=f"tf.saved_model.load(export).signatures['{export.IDS_SIGNATURE}'] "
            f"(beam_size={beam_size}, xla={xla})",
            cached=True,
            beam_size=beam_size,
            alpha=cfg["beam_alpha"],
        )
        output = last[0]  # the last timed call's ids: one call more would decode the same batch again
        lengths = (output != 0).sum(axis=1)
        results[name]["out_tokens_per_sentence"] = {"min": int(lengths.min()), "max": int(lengths.max())}
        if (output == beam_search.EOS_ID).any() or {int(lengths.min()), int(lengths.max())} != {cfg["decode_max_out"]}:
            raise RuntimeError(
                f"the SavedModel's {name} outputs are not all {cfg['decode_max_out']} tokens without "
                f"EOS: lengths {results[name]['out_tokens_per_sentence']} (see without_eos)."
            )
        library = batch_decoding.decode_batch(
            model,
            with_eos,
            SearchSettings(
                beam_size=beam_size,
                alpha=cfg["beam_alpha"],
                extra_length=cfg["decode_max_out"] - cfg["decode_src_len"] - 1,
            ),
        )[0]
        width = cfg["decode_max_out"]
        results[name]["check_equals_decode_batch"] = round(float(np.mean(output[:, :width] == library[:, :width])), 4)
    return results, xla


def savedmodel_row(hparams, cfg, modes, seed, quantize="", ids_only=False) -> dict:
    """The figures of the exported SavedModel, decode only, on the preset's model with random weights."""
    keras.utils.set_random_seed(seed)
    model = model_info.build_model(hparams, cfg["vocab_size"])
    without_eos(model)
    quantization.quantize_for_decoding(model, quantize)  # what export_model does after restoring
    with tempfile.TemporaryDirectory() as scratch:
        decode, xla = time_savedmodel(model, hparams, cfg, modes, scratch, quantize, ids_only)
    return {
        "params": int(model.count_params()),
        "train": None,
        "decode": decode,
        "savedmodel_xla": xla,
        "jit_compile": xla,
    }


# -- Our model converted to CTranslate2 -------------------------------------------------------------
def ctranslate2_row(hparams, cfg, modes, seed, compute_type) -> dict:
    """The figures of the converted model in CTranslate2 (decode only), on the preset's model with random weights."""
    import ctranslate2

    keras.utils.set_random_seed(seed)
    model = model_info.build_model(hparams, cfg["vocab_size"])
    without_eos(model)
    pieces = ["<pad>", "</s>", "<unk>"] + [f"w{index}" for index in range(3, cfg["vocab_size"])]
    extra_length = cfg["decode_max_out"] - cfg["decode_src_len"] - 1
    settings = ExportSettings.of(extra_length=extra_length, max_input_length=cfg["decode_src_len"] + 1)
    source = pc.random_decode_src(cfg)
    source_pieces = [[pieces[index] for index in row] for row in source.tolist()]
    with_eos = np.concatenate([source, np.full([len(source), 1], beam_search.EOS_ID)], axis=1)
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        spec = ctranslate2_export.transformer_spec(model, hparams, pieces, settings)
        spec.validate()
        spec.optimize()
        spec.save(scratch)
        translator = ctranslate2.Translator(
            scratch, device="cpu", compute_type=compute_type, intra_threads=pc.NUM_THREADS, inter_threads=1
        )
        index = {piece: number for number, piece in enumerate(pieces)}
        for name in modes:
            beam_size = {"greedy": 1, "beam": cfg["beam_size"]}[name]

            def call(batch, beam_size=beam_size):
                hypotheses = translator.translate_batch(
                    source_pieces,
                    beam_size=beam_size,
                    length_penalty=cfg["beam_alpha"],
                    max_decoding_length=cfg["decode_max_out"],
                    min_decoding_length=0,
                    max_batch_size=0,
                )
                output = np.zeros([len(hypotheses), cfg["decode_max_out"]], np.int32)
                for row, result in enumerate(hypotheses):
                    ids = [index[piece] for piece in result.hypotheses[0]]
                    output[row, : len(ids)] = ids
                return output

            pc.log(f"[t2t_lite {cfg['preset']}] CTranslate2 {compute_type} {name} decoding ...")
            results[name] = pc.time_decode(
                call,
                source,
                cfg,
                method=f"ctranslate2.Translator(compute_type={compute_type}).translate_batch(beam_size={beam_size}) "
                "of the model converted by t2t_lite/serve/ctranslate2_export.py",
                cached=True,
                beam_size=beam_size,
                alpha=cfg["beam_alpha"],
                compute_type=compute_type,
            )
            output = call(source)
            lengths = (output != 0).sum(axis=1)
            results[name]["out_tokens_per_sentence"] = {"min": int(lengths.min()), "max": int(lengths.max())}
            if {int(lengths.min()), int(lengths.max())} != {cfg["decode_max_out"]}:
                raise RuntimeError(
                    f"CTranslate2's {name} outputs are not all {cfg['decode_max_out']} tokens: lengths "
                    f"{results[name]['out_tokens_per_sentence']} (see without_eos)."
                )
            library = batch_decoding.decode_batch(
                model, with_eos, SearchSettings(beam_size=beam_size, alpha=cfg["beam_alpha"], extra_length=extra_length)
            )[0]
            results[name]["check_equals_decode_batch"] = round(
                float(np.mean(output == library[:, : output.shape[1]])), 4
            )
        selected = translator.compute_type
    return {
        "params": int(model.count_params()),
        "train": None,
        "decode": results,
        "ctranslate2": {"version": ctranslate2.__version__, "compute_type_selected": selected},
    }


# -- Entry point -----------------------------------------------------------------------------
def extra_flags(parser):
    parser.add_argument("--peers_dir", default=None, help="folder of peer_common.py (default ../shared/peers)")
    parser.add_argument(
        "--xla", action="store_true", help="hparams xla_compile=True for the train step, and XLA for decoding"
    )
    parser.add_argument(
        "--activation_dtype",
        default="float32",
        choices=("float32", "bfloat16"),
        help="hparams activation_dtype (bfloat16: mixed precision, float32 variables)",
    )
    parser.add_argument(
        "--memory",
        choices=("train", "decode"),
        default=None,
        help="only report the peak resident memory of one training update or decoding call",
    )
    parser.add_argument("--memory_tokens", type=int, default=4096, help="micro-batch target tokens for --memory train")
    parser.add_argument(
        "--savedmodel", action="store_true", help="only decode, with the exported SavedModel's translate_ids signature"
    )
    parser.add_argument(
        "--savedmodel_ids_only",
        action="store_true",
        help="with --savedmodel: export the translate_ids signature alone, the one the row calls",
    )
    parser.add_argument(
        "--ctranslate2",
        default="",
        choices=("", "float32", "int8"),
        help="only decode, with the model converted to CTranslate2 and loaded with this compute_type",
    )
    parser.add_argument(
        "--matmul_bound",
        action="store_true",
        help="only time the train step's matrix products, alone (XLA's kernels with --xla)",
    )
    parser.add_argument(
        "--quantize",
        default="",
        choices=quantization.MODES,
        help="decode with int8 products or bfloat16 product weights (t2t_lite/decode/quantization.py); "
        "decoding only: give --skip-train",
    )


def main():
    args, cfg = pc.parse_args(__doc__.splitlines()[0], extra_flags)
    if args.matmul_bound and (args.memory or args.activation_dtype != "float32"):
        sys.exit(
            "bench/peer_project.py: --matmul_bound times float32 products alone; run it without "
            "--memory and --activation_dtype."
        )
    if args.quantize and (args.memory or args.matmul_bound or not (args.skip_train or args.savedmodel)):
        sys.exit(
            "bench/peer_project.py: --quantize is for decoding only; give --skip-train (or --savedmodel), "
            "and no --memory or --matmul_bound."
        )
    if args.savedmodel and (args.memory or args.matmul_bound or args.xla or args.activation_dtype != "float32"):
        sys.exit(
            "bench/peer_project.py: --savedmodel decodes with the export's own settings (XLA where export.py "
            "has it); run it without --memory, --matmul_bound, --xla and --activation_dtype."
        )
    if args.savedmodel_ids_only and not args.savedmodel:
        sys.exit("bench/peer_project.py: --savedmodel_ids_only is an option of --savedmodel; give both.")
    if args.ctranslate2 and (args.memory or args.matmul_bound or args.xla or args.savedmodel or args.quantize):
        sys.exit(
            "bench/peer_project.py: --ctranslate2 decodes with CTranslate2 alone; run it without --memory, "
            "--matmul_bound, --xla, --savedmodel and --quantize."
        )
    hparams = preset_hparams(cfg, args.xla, args.activation_dtype)
    result = {
        "peer": "t2t_lite"
        + (" SavedModel" if args.savedmodel else "")
        + (f" CTranslate2 {args.ctranslate2}" if args.ctranslate2 else "")
        + (" +XLA" if args.xla else "")
        + (f" {args.activation_dtype}" if args.activation_dtype != "float32" else "")
        + (f" {args.quantize}" if args.quantize else ""),
        "preset": cfg["preset"],
        "versions": {
            "t2t_lite": t2t_lite.__version__,
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "numpy": np.__version__,
        },
        "threads": {
            "tf.intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "tf.inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        },
        "hparams_set": HPARAMS_SETS[cfg["preset"]],
        "jit_compile": args.xla,
        "activation_dtype": args.activation_dtype,
        "quantize": args.quantize,
    }
    if args.memory:
        result["memory"] = measure_memory(args.memory, cfg, args.memory_tokens, args.seed)
        pc.emit(result, args.out)
        return
    if args.matmul_bound:
        result["matmul_bound"] = measure_matmul_bound(hparams, cfg, args.xla)
        pc.emit(result, args.out)
        return
    modes = [mode.strip() for mode in args.decode.split(",") if mode.strip()]
    if args.savedmodel:
        result.update(savedmodel_row(hparams, cfg, modes, args.seed, args.quantize, args.savedmodel_ids_only))
        pc.emit(result, args.out)
        return
    if args.ctranslate2:
        result.update(ctranslate2_row(hparams, cfg, modes, args.seed, args.ctranslate2))
        pc.emit(result, args.out)
        return
    model, steps = build(hparams, cfg["vocab_size"], args.seed)
    result["params"] = int(model.count_params())
    quantization.quantize_for_decoding(model, args.quantize)  # after the float32 weights exist, as after a restore
    if not args.skip_train:
        pc.log(f"[t2t_lite {cfg['preset']}] training ...")
        result["train"] = time_training(steps, hparams, cfg, args.seed)
    if not args.skip_decode:
        result["decode"] = time_decoding(model, cfg, modes, xla=args.xla)
    pc.emit(result, args.out)


if __name__ == "__main__":
    main()
    # TensorFlow's interpreter teardown can take minutes (longest after XLA); the result is
    # written and flushed, so skip it to keep the whole comparison short.
    os._exit(0)
