"""parsing_wsj (§6.3): treebank files in tmp_dir -> words -> linearized trees, end to end."""

import os

import pytest

from t2t_lite import registry
from t2t_lite.data import datagen, trees
from t2t_lite.data.input_pipeline import batched_dataset
from t2t_lite.problems import parsing_wsj
from t2t_lite.problems.parsing_wsj import ParsingWsj

TREE_TEMPLATES = [
    "( (S (NP-SBJ (NNP {name}) ) (VP (VBZ sleeps) ) (. .) ))",
    "( (S (NP-SBJ (DT The) (NN {noun}) ) (VP (VBD rose) (NP-EXT (CD {number}) (NN %) ) (PP-TMP (IN in) "
    "(NP (NNP March) ))) (. .) ))",
    "( (S (NP-SBJ-1 (NNP {name}) ) (VP (VBD wanted) (S (NP-SBJ (-NONE- *-1) ) (VP (TO to) (VP (VB buy) "
    "(NP (DT a) (NN {noun}) ))))) (. .) ))",
]
NAMES, NOUNS = ["Vinken", "Smith", "Elsevier", "Lorillard"], ["index", "price", "dog", "share"]


def write_treebank(root, sections, trees_per_file=2):
    """Files <root>/wsj/NN/wsj_NN01.mrg, each holding a few trees from the templates."""
    for section in sections:
        directory = os.path.join(root, "wsj", section)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"wsj_{section}01.mrg"), "w") as file:
            for k in range(trees_per_file):
                template = TREE_TEMPLATES[(int(section) + k) % len(TREE_TEMPLATES)]
                file.write(template.format(name=NAMES[k % 4], noun=NOUNS[int(section) % 4], number=int(section)))
                file.write("\n")


class TinyParsing(ParsingWsj):
    approx_vocab_size = 400
    num_shards = {"train": 1, "dev": 1, "test": 1}


def test_paper_settings():
    problem = registry.problem("parsing_wsj")
    assert problem.decode_defaults() == {"beam_size": 21, "alpha": 0.3, "extra_length": 300}  # §6.3
    assert problem.approx_vocab_size == 16000 and problem.eval_metrics == ["bracket_f1"]


def test_the_sample_variant_differs_in_its_vocabulary_only():
    problem = registry.problem("parsing_wsj4k")
    assert isinstance(problem, ParsingWsj) and problem.approx_vocab_size == 4000
    assert problem.decode_defaults() == ParsingWsj().decode_defaults()
    assert {"(NP", ")NP", "(WHADVP", ")WHADVP", "XX"} <= problem.whole_pieces()


def test_standard_sections_split(tmp_path):
    write_treebank(str(tmp_path), [f"{n:02d}" for n in range(25)], trees_per_file=1)
    splits = parsing_wsj.split_files(parsing_wsj.treebank_files(str(tmp_path)), str(tmp_path))
    sections = {split: sorted(os.path.basename(os.path.dirname(p)) for p in paths) for split, paths in splits.items()}
    assert sections == {"train": [f"{n:02d}" for n in range(2, 22)], "dev": ["22"], "test": ["23"]}


def test_other_layouts_split_deterministically_by_file(tmp_path, capsys):
    write_treebank(str(tmp_path), [f"{n:02d}" for n in range(40, 99)], trees_per_file=1)
    files = parsing_wsj.treebank_files(str(tmp_path))
    splits = parsing_wsj.split_files(files, str(tmp_path))
    assert "split by name hash: the test set is not section 23" in capsys.readouterr().out
    assert sorted(sum(splits.values(), [])) == sorted(files)
    assert splits["dev"] and splits["test"] and len(splits["train"]) > 40
    shuffled = parsing_wsj.split_files(list(reversed(files)), str(tmp_path))
    assert {split: sorted(paths) for split, paths in shuffled.items()} == splits


def test_missing_treebank_says_where_to_put_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"LDC.*wsj/NN/wsj_NNNN\.mrg"):
        ParsingWsj().text_pairs(str(tmp_path), "train")


def test_end_to_end_words_to_linearized_trees(tmp_path):
    tmp_dir, data_dir = str(tmp_path / "raw"), str(tmp_path / "data")
    write_treebank(tmp_dir, [f"{n:02d}" for n in range(25)])
    report = datagen.generate(TinyParsing(), data_dir, tmp_dir)
    assert report.written == {"train": 40, "dev": 2, "test": 2}
    vocabulary = TinyParsing().vocabulary(data_dir)
    linearized = "(S (NP XX )NP (VP XX )VP . )S"
    assert len(vocabulary.encode(linearized)) == len(linearized.split())  # a tree token is one id
    with open(os.path.join(tmp_dir, "wsj", "23", "wsj_2301.mrg")) as file:
        expected = {" ".join(trees.words(trees.clean(t))): trees.clean(t) for t in trees.read_trees(file.read())}
    hparams = registry.hparams("transformer_tiny").replace(batch_size=256)
    for batch in batched_dataset(TinyParsing(), "test", data_dir, hparams).as_numpy_iterator():
        for inputs, targets in zip(batch["inputs"], batch["targets"]):
            sentence = vocabulary.decode(inputs)
            tree = trees.delinearize(vocabulary.decode(targets), sentence.split())
            assert tree == trees.normalize_tags(expected.pop(sentence))
    assert not expected  # every test sentence came back, with its tree


def test_datagen_says_once_that_the_test_set_is_not_section_23(tmp_path, capsys):
    tmp_dir = str(tmp_path / "raw")
    write_treebank(tmp_dir, [f"{n:02d}" for n in range(40, 99)], trees_per_file=1)
    datagen.generate(TinyParsing(), str(tmp_path / "data"), tmp_dir)
    assert capsys.readouterr().out.count("the test set is not section 23") == 1


def test_a_share_of_the_training_trees_is_spread_evenly_and_nested():
    """⌊n·p/100⌋ of n, counted by hand: 25 % of ten keeps the 4th and 8th, 30 % the 4th, 7th and 10th."""
    items = list(range(10))
    assert parsing_wsj.evenly_spaced_share(items, 25) == [3, 7]
    assert parsing_wsj.evenly_spaced_share(items, 30) == [3, 6, 9]
    assert parsing_wsj.evenly_spaced_share(items, 50) == [1, 3, 5, 7, 9]
    assert parsing_wsj.evenly_spaced_share(items, 100) == items
    many = list(range(1003))
    quarter, half = (set(parsing_wsj.evenly_spaced_share(many, p)) for p in (25, 50))
    assert len(quarter) == 250 and len(half) == 501 and quarter < half  # a learning curve's points nest
    for bad in (0, 101, 12.5, "50", True):
        with pytest.raises(ValueError, match=rf"train_percent={bad!r}: give a whole number of percent from 1 to 100"):
            parsing_wsj.evenly_spaced_share(items, bad)


def test_a_problem_with_a_train_percent_trains_on_that_share_and_keeps_dev_and_test_whole(tmp_path):
    tmp_dir = str(tmp_path)
    write_treebank(tmp_dir, [f"{n:02d}" for n in range(25)])

    class HalfParsing(TinyParsing):
        train_percent = 50

    whole, half = TinyParsing(), HalfParsing()
    everything = whole.text_pairs(tmp_dir, "train")
    assert len(everything) == 40 and half.text_pairs(tmp_dir, "train") == everything[1::2]
    for split in ("dev", "test"):
        assert half.text_pairs(tmp_dir, split) == whole.text_pairs(tmp_dir, split)
    assert half.raw_files(tmp_dir, "train") == whole.raw_files(tmp_dir, "train")  # the same files, fewer trees
