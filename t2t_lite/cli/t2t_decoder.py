"""t2t-decoder: translate (or parse) with a trained checkpoint, as tensor2tensor's t2t-decoder.

    t2t-decoder --problem=translate_ende --data_dir=D --output_dir=TRAIN_DIR \
        --decode_hparams="beam_size=4,alpha=0.6" --decode_from_file=newstest2014.en --decode_to_file=out.de

Without --decode_from_file or --decode_interactive it decodes a generated split
(--decode_split, default "test") and writes .decodes, .inputs and .targets files.

    t2t-decoder ... --score_file=pairs.tsv --decode_to_file=pairs.scores

scores given `source<TAB>target` lines instead: log P(target | source) per line
(`--decode_hparams=score_per_token=true` adds each subword's term).

`--decode_hparams=write_alignment=true` writes each translation (or scored pair) as
`text ||| 0-0 2-1 1-2`, its word alignment (t2t_lite/decode/alignment.py).
"""

import os

from absl import flags

from t2t_lite.cli import distinct_paths
from t2t_lite.cli import flags as t2t_flags
from t2t_lite.data import datagen, text_lines
from t2t_lite.decode import decode_files, encoded_inputs, input_notes, scoring, translation
from t2t_lite.insights import attention_readout
from t2t_lite.run_dir import model_info

FLAGS = flags.FLAGS
flags.DEFINE_string("decode_from_file", None, "Decode each line of this UTF-8 text file.")
flags.DEFINE_string("decode_to_file", None, "Where to write one output line per input line.")
flags.DEFINE_string(
    "score_file",
    None,
    "Score each `source<TAB>target` line of this UTF-8 file instead of decoding: the natural log of "
    "P(target | source), EOS included, one line per pair (to --decode_to_file, else FILE.scores).",
)
flags.DEFINE_string(
    "target_prefix_file",
    None,
    "With --decode_from_file: line i is the target prefix of input line i (raw text; empty: none). "
    "Each translation starts with its prefix and the search goes on from there.",
)
flags.DEFINE_bool("decode_interactive", False, "Read sentences from stdin and print their decodings.")
flags.DEFINE_enum(
    "decode_split", "test", ["train", "dev", "test"], "The generated split to decode when no file is given."
)
flags.DEFINE_string(
    "attention_dir",
    None,
    "Also write the attention and beam page of the decoded sentences, "
    "DIR/attention.html (one self-contained file: open it in a browser).",
)
flags.DEFINE_bool(
    "attention_pngs",
    False,
    "With --attention_dir, also one PNG heat-map per sentence, attention kind, "
    "layer and head (DIR/sentence_NNNN/; needs matplotlib).",
)


def main(argv):
    del argv
    t2t_flags.prepare()
    t2t_flags.require("problem", "data_dir")
    model_dir = t2t_flags.trained_model_dir()
    problem = t2t_flags.problem_from_flags()
    t2t_flags.check_model_flag()
    if FLAGS.decode_interactive and (FLAGS.decode_from_file or FLAGS.decode_to_file):
        raise t2t_flags.UsageError(
            "--decode_interactive reads stdin and prints to stdout: leave out "
            "--decode_from_file and --decode_to_file, or --decode_interactive."
        )
    _check_paths()
    hparams, settings = _settings(problem, model_dir)
    if FLAGS.score_file:
        return _score(problem, hparams, settings)
    # Everything a typo can break is checked before the model is loaded and hours are spent decoding.
    lines = _read_lines() if FLAGS.decode_from_file else None
    prefixes = _read_prefixes(len(lines)) if FLAGS.target_prefix_file else None
    output = None if FLAGS.decode_interactive else _output_path(problem, model_dir, settings)
    page = _attention_page_path()
    vocabulary, model = t2t_flags.trained_model(problem, hparams, settings.quantize)
    if FLAGS.decode_interactive:
        decode_files.decode_interactive(model, vocabulary, settings)
        return
    if lines is not None:
        try:
            translations = translation.translate(model, vocabulary, lines, settings, prefixes=prefixes)
        except encoded_inputs.BadPrefixError as error:
            raise t2t_flags.UsageError(f"--target_prefix_file={FLAGS.target_prefix_file}: {error}") from None
        except encoded_inputs.BadInputError as error:
            raise t2t_flags.UsageError(f"--decode_from_file={FLAGS.decode_from_file}: {error}") from None
        decode_files.write_lines(output, (t.line(settings.writes_several) for t in translations))
        note = input_notes.truncation_note(translations, settings, "line")
        warning = _longer_than_trained(model, hparams, settings, translations, "line")
        if prefixes:
            note = "\n".join(filter(None, [note, _long_prefixes(model, hparams, settings, vocabulary, prefixes)]))
    else:
        try:
            translations = decode_files.decode_split(
                model, problem, FLAGS.data_dir, FLAGS.decode_split, settings, output
            )
        except (FileNotFoundError, encoded_inputs.BadInputError, datagen.DamagedShardError) as error:
            raise t2t_flags.UsageError(f"--decode_split={FLAGS.decode_split}: {error}") from None
        note = input_notes.truncation_note(translations, settings, f"{FLAGS.decode_split} example")
        warning = _longer_than_trained(model, hparams, settings, translations, f"{FLAGS.decode_split} example")
    print(f"Wrote {len(translations)} decodings to {output}")
    for said in (note, warning):
        if said:
            print(said)
    if page:
        _write_attention(model, vocabulary, translations, page, problem, settings)


def _score(problem, hparams, settings):
    """--score_file: every pair read and checked before the model is loaded, then scored in batches."""
    try:
        pairs = scoring.read_score_file(FLAGS.score_file)
    except (OSError, ValueError) as error:
        raise t2t_flags.UsageError(f"--score_file: {error}") from None
    output = FLAGS.decode_to_file or FLAGS.score_file + ".scores"
    _check_distinct(problem, {"--decode_to_file" if FLAGS.decode_to_file else "--score_file's .scores": output})
    vocabulary, model = t2t_flags.trained_model(problem, hparams, settings.quantize)
    try:
        scores = scoring.score_pairs(model, vocabulary, pairs, settings)
    except encoded_inputs.BadInputError as error:
        raise t2t_flags.UsageError(f"--score_file={FLAGS.score_file}: {error}") from None
    decode_files.write_lines(output, (score.line(settings.score_per_token) for score in scores))
    print(f"Wrote {len(scores)} scores (natural log of P(target | source)) to {output}")
    for said in _score_notes(model, hparams, settings, pairs, scores):
        if said:
            print(said)


def _score_notes(model, hparams, settings, pairs, scores) -> tuple:
    """What scoring says of its pairs: those with an empty side, and sides longer than any trained on."""
    limit, reason = input_notes.max_input_ids(model, hparams, settings)
    consequence = "and were scored whole: {listed} of --score_file. Their scores are extrapolation."
    return (
        input_notes.empty_sides_note(pairs),
        input_notes.longer_than_limit_note([s.source_length for s in scores], limit, reason, "source", consequence),
        input_notes.longer_than_limit_note([len(s.per_token) for s in scores], limit, reason, "target", consequence),
    )


def _longer_than_trained(model, hparams, settings, translations, noun):
    """The warning for inputs read whole beyond the longest example trained on (max_input_size cuts instead)."""
    if settings.max_input_size:
        return ""
    limit, reason = input_notes.max_input_ids(model, hparams, settings)
    return input_notes.longer_than_trained_note(translations, limit, reason, noun)


def _long_prefixes(model, hparams, settings, vocabulary, prefixes) -> str:
    """The warning for --target_prefix_file lines longer than the model was trained on (none is cut)."""
    limit, reason = input_notes.max_input_ids(model, hparams, settings)
    lengths = [len(vocabulary.encode(prefix)) + 1 for prefix in prefixes]  # with EOS, as its translation at least
    return input_notes.longer_than_limit_note(
        lengths,
        limit,
        reason,
        "prefix line",
        "so their translations are as long or longer: {listed} of --target_prefix_file. They are extrapolation.",
    )


def _check_paths():
    """Each path flag given is checked before any work: a typo costs a message, not a decoding run."""
    t2t_flags.existing_dir("data_dir")
    if FLAGS.output_dir:
        t2t_flags.existing_dir("output_dir")
    if FLAGS.score_file:
        t2t_flags.existing_file("score_file")
        for other in ("decode_from_file", "decode_interactive", "attention_dir"):
            if FLAGS[other].value:
                raise t2t_flags.UsageError(f"--score_file scores given pairs: leave out --{other}.")
    if FLAGS.target_prefix_file:
        if not FLAGS.decode_from_file:
            raise t2t_flags.UsageError(
                "--target_prefix_file gives the prefixes of --decode_from_file's lines: give both."
            )
        t2t_flags.existing_file("target_prefix_file")
    if FLAGS.decode_from_file:
        t2t_flags.existing_file("decode_from_file")
    if FLAGS.decode_to_file:
        t2t_flags.writable_file("decode_to_file")
    if FLAGS.attention_dir:
        t2t_flags.writable_dir("attention_dir")
    elif FLAGS.attention_pngs:
        raise t2t_flags.UsageError("--attention_pngs writes into --attention_dir: give --attention_dir too.")


def _attention_page_path():
    if not FLAGS.attention_dir:
        return None
    if FLAGS.decode_interactive:
        raise t2t_flags.UsageError(
            "--attention_dir draws the sentences of --decode_from_file or of a split, "
            "not of --decode_interactive: leave one out."
        )
    page = os.path.join(FLAGS.attention_dir, "attention.html")
    if os.path.exists(page):
        print(f"{page} exists: it will be replaced by this run's page.")
    return page


def _write_attention(model, vocabulary, translations, page, problem, settings):
    """The attention and beam page, and with --attention_pngs the PNG heat-maps, of this run."""
    os.makedirs(FLAGS.attention_dir, exist_ok=True)
    source = FLAGS.decode_from_file or f"the {FLAGS.decode_split} split"
    details = (
        f"{problem.name}, {source}: {len(translations)} sentence(s) decoded with "
        f"{FLAGS.checkpoint_path or FLAGS.output_dir} (beam_size={settings.search.beam_size}, "
        f"alpha={settings.search.alpha}, extra_length={settings.search.extra_length})."
    )
    attention_readout.write_attention_page(
        model, vocabulary, translations, page, title=f"Attention and beams: {problem.name}", details=details
    )
    print(
        f"Wrote the attention and beam page of {len(translations)} sentence(s) "
        f"({os.path.getsize(page) / 2**20:.1f} MiB) to {page}"
    )
    if FLAGS.attention_pngs:
        if os.path.isdir(os.path.join(FLAGS.attention_dir, "sentence_0000")):
            print(f"{FLAGS.attention_dir} holds PNGs of an earlier run: this run's replace them.")
        written = attention_readout.attention_pictures(model, vocabulary, translations, FLAGS.attention_dir)
        print(f"Wrote {len(written)} attention pictures to {FLAGS.attention_dir}")


def _settings(problem, model_dir):
    """The model's hparams and the decoding settings, with errors that name their flag."""
    hparams = t2t_flags.trained_hparams(model_dir)
    settings = t2t_flags.decode_settings(hparams, problem)
    if settings.score_per_token and not FLAGS.score_file:
        raise t2t_flags.UsageError(
            "--decode_hparams: score_per_token=true adds each subword's term to --score_file's scores, and this "
            "run decodes: give --score_file, or leave it out."
        )
    if FLAGS.score_file and (settings.writes_several or settings.search.samples or settings.max_input_size):
        raise t2t_flags.UsageError(
            "--decode_hparams: return_beams, num_samples, sampling_method=random and max_input_size choose what a "
            "decoding reads and writes; --score_file scores given pairs whole: leave them out."
        )
    return hparams, settings


def _read_prefixes(count: int) -> list:
    """The prefix file's lines, one per input line (checked before the model is loaded)."""
    try:
        prefixes = text_lines.read_lines(FLAGS.target_prefix_file)
    except (OSError, ValueError) as error:
        raise t2t_flags.UsageError(f"--target_prefix_file: {error}") from None
    if len(prefixes) != count:
        raise t2t_flags.UsageError(
            f"--target_prefix_file={FLAGS.target_prefix_file} has {len(prefixes)} lines but --decode_from_file has "
            f"{count}: line i is the prefix of input line i (an empty line: no prefix)."
        )
    return prefixes


def _check_distinct(problem, outputs: dict) -> None:
    """No output may be one of the files the run reads, nor two inputs one file (compared after resolving links).

    Besides the flags' files: the run's records beside its checkpoints, and the vocabulary in --data_dir.
    """
    inputs = {f"--{name}": FLAGS[name].value for name in ("decode_from_file", "target_prefix_file", "score_file")}
    run_dir = t2t_flags.trained_model_dir()
    for record in (model_info.HPARAMS_FILE, model_info.PROBLEM_FILE):
        inputs[f"the run's {record}"] = os.path.join(run_dir, record)
    if hasattr(problem, "vocab_filename"):
        inputs["--data_dir's vocabulary"] = os.path.join(FLAGS.data_dir, problem.vocab_filename())
    distinct_paths.check_distinct(inputs, outputs)


def _read_lines():
    try:
        return text_lines.read_lines(FLAGS.decode_from_file)
    except (OSError, ValueError) as error:
        raise t2t_flags.UsageError(f"--decode_from_file: {error}") from None


def _output_path(problem, model_dir, settings):
    """Where the decodings go; its directory must exist and it must not be the input file."""
    if FLAGS.decode_from_file:
        output = FLAGS.decode_to_file or decode_files.default_output_path(
            FLAGS.decode_from_file, FLAGS.model, FLAGS.hparams_set, problem.name, settings
        )
    else:
        output = FLAGS.decode_to_file or os.path.join(model_dir, f"{problem.name}.{FLAGS.decode_split}.decodes")
    flag = "--decode_to_file" if FLAGS.decode_to_file else "--decode_from_file/--output_dir"
    directory = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(directory):
        raise t2t_flags.UsageError(f"{flag}: the directory {directory} of {output} does not exist; create it first.")
    if FLAGS.decode_from_file:
        written = {flag: output}
    else:  # a split's decodings, with its sources and references beside them
        written = dict(zip((flag, f"{flag}'s .inputs", f"{flag}'s .targets"), decode_files.split_output_paths(output)))
    if FLAGS.attention_dir:
        written["--attention_dir's attention.html"] = os.path.join(FLAGS.attention_dir, "attention.html")
    _check_distinct(problem, written)
    if os.path.exists(output):
        print(f"{output} exists: it will be replaced by this run's decodings.")
    return output
