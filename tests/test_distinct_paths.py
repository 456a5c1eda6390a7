"""No tool writes over a file it reads, nor reads one file under two flags: a link, a relative path or a
hard link to the same file is found, and the tool stops naming both flags before it writes anything."""

import os

import pytest
from absl import flags as absl_flags
from test_compatibility import FIXTURE  # a trained translate_files run with its SentencePiece vocabulary

from t2t_lite import registry
from t2t_lite.cli import (
    distinct_paths,
    t2t_avg_all,
    t2t_bleu,
    t2t_datagen,
    t2t_decoder,
    t2t_exporter,
    t2t_parse_eval,
    t2t_trainer,
    t2t_translate_all,
)
from t2t_lite.cli.flags import UsageError
from t2t_lite.run_dir import model_info


def run(tool, *argv):
    absl_flags.FLAGS.unparse_flags()
    absl_flags.FLAGS(["tool", *argv])
    try:
        tool.main([])
    finally:
        absl_flags.FLAGS.unparse_flags()


def contents(directory) -> dict:
    """Every file under `directory` with its bytes: what a refused run must leave as it was."""
    return {
        os.path.join(root, name): open(os.path.join(root, name), "rb").read()
        for root, _, names in os.walk(directory)
        for name in names
    }


@pytest.fixture
def pairs(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("1 2\t2 1\n")
    return path


def test_one_file_under_two_names_is_found(tmp_path, pairs, monkeypatch):
    (tmp_path / "link.tsv").symlink_to(pairs)
    os.link(pairs, tmp_path / "hard.tsv")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    for other in (tmp_path / "link.tsv", tmp_path / "hard.tsv"):
        with pytest.raises(UsageError, match=r"--b=.* is --a=.*pairs.tsv \(the same file, through a link"):
            distinct_paths.check_distinct({"--a": str(pairs), "--b": str(other)})
    for other in ("../pairs.tsv", tmp_path / "sub" / ".." / "pairs.tsv"):
        with pytest.raises(UsageError, match=r"--b=.*pairs.tsv is --a: one file given as two inputs"):
            distinct_paths.check_distinct({"--a": str(pairs), "--b": str(other)})
    (tmp_path / "other.tsv").write_text("1 2\t2 1\n")  # equal contents, another file
    distinct_paths.check_distinct({"--a": str(pairs), "--b": str(tmp_path / "other.tsv"), "--c": None})
    distinct_paths.check_distinct({"--a": "gs://bucket/x"}, {"--b": "gs://bucket/x"})  # remote: not checked here


def test_the_message_says_which_is_read_and_which_written(tmp_path, pairs):
    with pytest.raises(UsageError, match=r"^--out=.*pairs.tsv is --in: writing it would replace --in, which this run"):
        distinct_paths.check_distinct({"--in": str(pairs)}, {"--out": str(pairs)})
    with pytest.raises(UsageError, match=r"^--b=.* is --a: one file given as two inputs\. Give each its own file\.$"):
        distinct_paths.check_distinct({"--a": str(pairs), "--b": str(pairs)})
    with pytest.raises(UsageError, match=r"is --a: one output would replace the other\. Give each its own directory"):
        distinct_paths.check_distinct({}, {"--a": str(tmp_path), "--b": str(tmp_path)})
    new = str(tmp_path / "not_yet.txt")  # an output that does not exist yet is compared by its path
    with pytest.raises(UsageError, match="not_yet.txt is --a: one output would replace the other"):
        distinct_paths.check_distinct({}, {"--a": new, "--b": new})


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """An algorithmic_reverse data_dir (its vocabulary needs no file) and a run directory with its hparams.json.

    No checkpoint: every refusal here comes before a model would be loaded.
    """
    root = tmp_path_factory.mktemp("distinct")
    (root / "data").mkdir()
    hparams = registry.hparams("transformer_tiny")
    model_info.write_model_info(str(root / "train"), hparams, "algorithmic_reverse", "transformer", 13)
    return root


def decoder(run_dir, *argv):
    run(
        t2t_decoder,
        "--problem=algorithmic_reverse",
        f"--data_dir={run_dir / 'data'}",
        f"--output_dir={run_dir / 'train'}",
        *argv,
    )


def test_decoder_never_writes_over_its_inputs(run_dir, tmp_path, pairs):
    source, prefixes = tmp_path / "in.txt", tmp_path / "prefixes.txt"
    source.write_text("3 4 5\n")
    prefixes.write_text("5\n")
    (tmp_path / "pairs_link.tsv").symlink_to(pairs)
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "attention.html").symlink_to(source)
    before = contents(tmp_path)
    cases = [
        (
            (f"--score_file={pairs}", f"--decode_to_file={tmp_path / 'pairs_link.tsv'}"),
            "--decode_to_file=.* is --score_file",
        ),
        ((f"--decode_from_file={source}", f"--decode_to_file={source}"), "--decode_to_file=.* is --decode_from_file"),
        (
            (f"--decode_from_file={source}", f"--target_prefix_file={prefixes}", f"--decode_to_file={prefixes}"),
            "--decode_to_file=.* is --target_prefix_file",
        ),
        (
            (f"--decode_from_file={source}", f"--decode_to_file={run_dir / 'train' / 'hparams.json'}"),
            "--decode_to_file=.*hparams.json is the run's hparams.json: writing it would replace",
        ),
        (
            (f"--decode_from_file={source}", f"--target_prefix_file={source}"),
            "--target_prefix_file=.* is --decode_from_file: one file given as two inputs",
        ),
        (
            (
                f"--decode_from_file={source}",
                f"--decode_to_file={tmp_path / 'o.txt'}",
                f"--attention_dir={tmp_path / 'pages'}",
            ),
            "--attention_dir's attention.html=.* is --decode_from_file",
        ),
    ]
    records = contents(run_dir / "train")
    for argv, message in cases:
        with pytest.raises(UsageError, match=message):
            decoder(run_dir, *argv)
    assert contents(tmp_path) == before and contents(run_dir / "train") == records


def test_decoder_never_writes_over_the_vocabulary(tmp_path):
    vocabulary = registry.problem("translate_files").vocab_filename()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / vocabulary).symlink_to(FIXTURE / "data" / vocabulary)  # a write would replace the link
    (tmp_path / "in.txt").write_text("der hund\n")
    with pytest.raises(UsageError, match=f"--decode_to_file=.*{vocabulary} is --data_dir's vocabulary"):
        run(
            t2t_decoder,
            "--problem=translate_files",
            f"--data_dir={tmp_path / 'data'}",
            f"--output_dir={FIXTURE / 'train'}",
            f"--decode_from_file={tmp_path / 'in.txt'}",
            f"--decode_to_file={tmp_path / 'data' / vocabulary}",
        )
    assert (tmp_path / "data" / vocabulary).is_symlink()


def test_decoder_outputs_are_distinct_from_each_other(run_dir, tmp_path):
    # A split's decodings X.decodes come with X.inputs and X.targets, and the page with --attention_dir.
    (tmp_path / "pages").mkdir()
    output = tmp_path / "pages" / "attention.html"
    with pytest.raises(UsageError, match="--attention_dir's attention.html=.* is --decode_to_file: one output would"):
        decoder(run_dir, f"--decode_to_file={output}", f"--attention_dir={tmp_path / 'pages'}")
    assert os.listdir(tmp_path / "pages") == []


def test_bleu_refuses_a_reference_given_as_its_own_translation(tmp_path):
    reference = tmp_path / "ref.de"
    reference.write_text("ein Haus\n")
    (tmp_path / "link.de").symlink_to(reference)
    with pytest.raises(UsageError, match=r"--translation=.*link.de is --reference=.*ref.de .*one file given as two"):
        run(t2t_bleu, f"--reference={reference}", f"--translation={tmp_path / 'link.de'}")
    (tmp_path / "translations").mkdir()
    (tmp_path / "translations" / "val.en-100").write_text("ein Haus\n")
    with pytest.raises(UsageError, match="--plot_file=.*ref.de is --reference: writing it would replace --reference"):
        run(
            t2t_bleu,
            f"--reference={reference}",
            f"--translations_dir={tmp_path / 'translations'}",
            f"--plot_file={reference}",
        )
    with pytest.raises(UsageError, match="--plot_file=.*val.en-100 is --translations_dir's val.en-100: writing it"):
        run(
            t2t_bleu,
            f"--reference={reference}",
            f"--translations_dir={tmp_path / 'translations'}",
            f"--plot_file={tmp_path / 'translations' / 'val.en-100'}",
        )
    assert reference.read_text() == "ein Haus\n" == (tmp_path / "translations" / "val.en-100").read_text()


def test_parse_eval_refuses_gold_trees_as_decoded_trees(tmp_path):
    trees = tmp_path / "wsj23.mrg"
    trees.write_text("(S (NP (NN x)))\n")
    with pytest.raises(UsageError, match="--gold_trees=.* is --decoded_trees: one file given as two inputs"):
        run(t2t_parse_eval, f"--decoded_trees={trees}", f"--gold_trees={trees}")


def test_translate_all_writes_apart_from_the_run(run_dir, tmp_path):
    source = tmp_path / "val.en"
    source.write_text("3 4\n")
    common = ("--problem=algorithmic_reverse", f"--data_dir={run_dir / 'data'}", f"--source={source}")
    train = run_dir / "train"
    with pytest.raises(UsageError, match="--translations_dir=.* is --model_dir: writing it would replace --model_dir"):
        run(t2t_translate_all, *common, f"--model_dir={train}", f"--translations_dir={train}/")
    (tmp_path / "translations").mkdir()
    (tmp_path / "translations" / "avg5").symlink_to(train)
    with pytest.raises(UsageError, match="--translations_dir's avg5=.* is --model_dir"):
        run(
            t2t_translate_all,
            *common,
            f"--model_dir={train}",
            f"--translations_dir={tmp_path / 'translations'}",
            "--average_last_n=5",
        )


def test_datagen_overwrite_never_removes_its_vocab_from(tmp_path):
    problem = registry.problem("translate_files")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    vocabulary = data_dir / problem.vocab_filename()
    vocabulary.write_bytes(b"the only copy of another run's vocabulary")
    with pytest.raises(UsageError, match=f"--data_dir's {problem.vocab_filename()}=.* is --vocab_from"):
        run(
            t2t_datagen,
            "--problem=translate_files",
            f"--data_dir={data_dir}",
            f"--tmp_dir={tmp_path / 'raw'}",
            f"--vocab_from={vocabulary}",
            "--overwrite",
        )
    assert vocabulary.read_bytes() == b"the only copy of another run's vocabulary"


def test_exporter_writes_apart_from_the_run(run_dir):
    train = run_dir / "train"
    before = contents(train)
    common = ("--problem=algorithmic_reverse", f"--data_dir={run_dir / 'data'}")
    with pytest.raises(UsageError, match="--export_dir=.* is --output_dir: writing it would replace --output_dir"):
        run(t2t_exporter, *common, f"--output_dir={train}", f"--export_dir={train}")
    with pytest.raises(UsageError, match="--export_dir=.* is --checkpoint_path's directory"):
        run(t2t_exporter, *common, f"--checkpoint_path={train}/ckpt-1", f"--export_dir={train}")
    with pytest.raises(UsageError, match="--export_dir=.* is --data_dir"):
        run(t2t_exporter, *common, f"--output_dir={train}", f"--export_dir={run_dir / 'data'}")
    assert contents(train) == before


def test_avg_all_writes_apart_from_the_run(run_dir, tmp_path):
    (tmp_path / "train_link").symlink_to(run_dir / "train")
    with pytest.raises(UsageError, match="--output_dir=.*train_link is --model_dir=.*train .*through a link"):
        run(t2t_avg_all, f"--model_dir={run_dir / 'train'}", f"--output_dir={tmp_path / 'train_link'}")


def test_trainer_writes_apart_from_its_data(run_dir):
    with pytest.raises(UsageError, match="--output_dir=.* is --data_dir: writing it would replace --data_dir"):
        run(
            t2t_trainer,
            "--problem=algorithmic_reverse",
            "--hparams_set=transformer_tiny",
            f"--data_dir={run_dir / 'data'}",
            f"--output_dir={run_dir / 'data'}",
        )
