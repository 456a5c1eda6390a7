"""EVALB-style bracket scoring (COLLINS.prm) and output repair, against hand-counted brackets."""

import os
import subprocess
import sys

import pytest

from t2t_lite.data import trees
from t2t_lite.evaluate import bracket_f1

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOHN = "(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))"  # S NP VP NP over 4 scored words
TELESCOPE = "(S (NP (PRP I)) (VP (VBD saw) (NP (DT the) (NN man)) (PP (IN with) (NP (DT a) (NN telescope)))))"


def score(decoded, gold_text):
    gold = trees.read_trees(gold_text)[0]
    return bracket_f1.score_tree(
        trees.delinearize(bracket_f1.repair(decoded, len(trees.words(gold))), trees.words(gold)), gold
    )


def test_the_gold_linearization_scores_100():
    gold = trees.read_trees(JOHN)[0]
    result = score(trees.linearize(gold), JOHN)
    assert (result.matched, result.predicted, result.gold) == (4, 4, 4)
    assert result.f1 == 100.0


def test_punctuation_attachment_is_not_scored():
    result = score("(S (NP XX )NP (VP XX (NP XX XX )NP . )VP )S", JOHN)
    assert (result.precision, result.recall) == (100.0, 100.0)


def test_pp_attachment_error_against_hand_counts():
    # Gold: S(0,7) NP(0,1) VP(1,7) NP(2,4) PP(4,7) NP(5,7). The prediction adds NP(2,7).
    result = score("(S (NP XX )NP (VP XX (NP (NP XX XX )NP (PP XX (NP XX XX )NP )PP )NP )VP )S", TELESCOPE)
    assert (result.matched, result.predicted, result.gold) == (6, 7, 6)
    assert result.precision == pytest.approx(600 / 7)
    assert result.recall == 100.0
    assert result.f1 == pytest.approx(1200 / 13)


def test_advp_and_prt_are_one_label():
    result = score("(S (NP XX )NP (VP XX (ADVP XX )ADVP )VP )S", "(S (NP (PRP He)) (VP (VBD gave) (PRT (RP up))))")
    assert result.f1 == 100.0


def test_brackets_are_a_multiset():
    # Gold has the unary chain NP -> NP over "John": NP(0,1) twice; the prediction has it once.
    result = score("(S (NP XX )NP (VP XX )VP )S", "(S (NP (NP (NNP John))) (VP (VBD ran)))")
    assert (result.matched, result.predicted, result.gold) == (3, 3, 4)
    assert result.f1 == pytest.approx(2 * 100 * 75 / 175)


@pytest.mark.parametrize(
    "decoded, repaired",
    [
        # Missing closing brackets are added at the end; the missing leaf joins the root.
        ("(S (NP XX )NP (VP XX (NP XX XX", "(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S"),
        # A closing bracket with nothing open is dropped, and so is what follows the complete tree.
        (")NP (S (NP XX )NP (VP XX (NP XX XX )NP )VP . )S )S (NP", "(S (NP XX )NP (VP XX (NP XX XX )NP )VP . )S"),
        # Extra leaves are dropped from the end, and so is the constituent they leave empty.
        ("(S (NP XX XX XX )NP (VP XX XX )VP (NP XX )NP )S", "(S (NP XX XX XX )NP (VP XX XX )VP )S"),
        # A closing bracket of another label closes the open constituent.
        ("(S (NP XX )VP XX XX XX . )S", "(S (NP XX )NP XX XX XX . )S"),
    ],
)
def test_repair(decoded, repaired):
    assert bracket_f1.repair(decoded, 5) == repaired


def test_repaired_outputs_are_scored_against_hand_counts():
    # Closing VP ends the tree "(S (NP XX XX )NP )S"; 3 leaves are added to the root.
    # Predicted S(0,4) NP(0,2); gold S(0,4) NP(0,1) VP(1,4) NP(2,4): 1 match.
    result = score("(S (NP XX XX )NP )VP (VP XX XX", JOHN)
    assert (result.matched, result.predicted, result.gold) == (1, 2, 4)


def test_corpus_scores_sum_the_counts_and_the_tool_prints_them(tmp_path):
    decoded = tmp_path / "decoded"
    decoded.write_text(
        "(S (NP XX )NP (VP XX (NP XX XX )NP . )VP )S\n"
        "(S (NP XX )NP (VP XX (NP (NP XX XX )NP (PP XX (NP XX XX )NP )PP )NP )VP\n"
    )
    gold = tmp_path / "gold.mrg"
    gold.write_text(f"( {JOHN.replace('(NP ', '(NP-SBJ ', 1)} )\n( {TELESCOPE} )\n")
    report = bracket_f1.evaluate_files(str(decoded), str(gold))
    assert (report.score.matched, report.score.predicted, report.score.gold) == (4 + 6, 4 + 7, 4 + 6)
    assert (report.sentences, report.repaired) == (2, 1)
    output = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "bin", "t2t-parse-eval"),
            f"--decoded_trees={decoded}",
            f"--gold_trees={gold}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"F1 = {report.score.f1:.2f}" in output


def test_line_count_mismatch_names_both_files(tmp_path):
    decoded, gold = tmp_path / "decoded", tmp_path / "gold"
    decoded.write_text("(S XX )S\n")
    gold.write_text(f"{JOHN}\n{TELESCOPE}\n")
    with pytest.raises(bracket_f1.ParseEvalError, match=r"decoded has 1 lines .*gold has 2 trees"):
        bracket_f1.evaluate_files(str(decoded), str(gold))


def test_another_parsers_bracketed_output_is_scored_as_evalb_with_function_tags_and_top_removed(tmp_path):
    # Predicted (Berkeley style, TOP root, function tags): S(0,4) NP(0,1) VP(1,4) NP(1,4) with the
    # last NP wrong (gold NP(2,4)); the "." is gold punctuation, so no span counts it. TOP is not scored,
    # NP-SBJ is NP: 3 of 4 predicted match 3 of 4 gold.
    decoded, gold = tmp_path / "berkeley.txt", tmp_path / "gold.mrg"
    decoded.write_text(
        "(TOP (S (NP-SBJ (NNP John)) (VP=2 (NP-PRD (VBZ has) (DT a) (NN dog))) (. .)))\n"
        "(ROOT (S (NP (PRP I)) (VP (VBD saw) (NP (DT the) (NN man)) (PP-LOC (IN with) (NP (DT a) (NN telescope))))))\n"
    )
    gold.write_text(f"( {JOHN} )\n( {TELESCOPE} )\n")
    report = bracket_f1.evaluate_files(str(decoded), str(gold))
    # The second sentence is the gold tree under a ROOT, which counts as TOP does: 6 of 6.
    assert (report.score.matched, report.score.predicted, report.score.gold) == (3 + 6, 4 + 6, 4 + 6)
    assert report.repaired == 0


def test_the_decoders_targets_file_is_a_gold_file_equal_to_the_treebanks(tmp_path):
    decoded = tmp_path / "decoded"
    decoded.write_text("(S (NP XX )NP (VP XX (NP (NP XX XX )NP (PP XX (NP XX XX )NP )PP )NP )VP )S\n(S XX XX )S\n")
    bracketed, linearized = tmp_path / "gold.mrg", tmp_path / "split.targets"
    bracketed.write_text(f"( {TELESCOPE} )\n( {JOHN} )\n")
    linearized.write_text("\n".join(trees.linearize(tree) for tree in trees.read_trees(bracketed.read_text())) + "\n")
    from_treebank = bracket_f1.evaluate_files(str(decoded), str(bracketed))
    from_targets = bracket_f1.evaluate_files(str(decoded), str(linearized))
    # TELESCOPE: 6 of 7 (the extra NP); JOHN's "(S XX XX )S" gets 2 leaves more and scores S only.
    assert (from_targets.score.matched, from_targets.score.predicted, from_targets.score.gold) == (7, 8, 10)
    assert from_targets == from_treebank


def test_a_bracketed_prediction_of_other_words_names_the_tree(tmp_path):
    decoded, gold = tmp_path / "decoded", tmp_path / "gold"
    decoded.write_text("(S (NP (NNP John)) (VP (VBZ sleeps)))\n")
    gold.write_text(f"{JOHN}\n")
    with pytest.raises(bracket_f1.ParseEvalError, match=r"tree 1 has 2 words and its gold tree 5"):
        bracket_f1.evaluate_files(str(decoded), str(gold))


@pytest.mark.parametrize(
    "text, linearized",
    [
        ("(S (NP XX )NP )S\n", True),
        ("\n\n", True),  # a decoder that ended every parse at once
        ("(S XX XX\n", True),  # no bracket closed, and no bracketed tree either: repaired
        ("( (S (NP (NNP John)) (VP (VBZ sleeps))) )\n", False),
        ("(S\n  (NP (NNP John))\n  (VP (VBZ sleeps)))\n", False),
    ],
)
def test_the_format_of_a_file_is_told_by_its_closing_tokens(text, linearized):
    assert bracket_f1.is_linearized(text) == linearized
