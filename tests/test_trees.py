"""Penn Treebank trees and the linearization of Vinyals & Kaiser et al. (2015) used in §6.3."""

import pytest

from t2t_lite.data import trees
from t2t_lite.data.trees import Tree

# Two trees in the treebank's .mrg style: outer empty-label brackets, function tags,
# indices, -NONE- traces (one leaving an empty NP behind), -LRB-/-RRB- and punctuation.
MRG_TEXT = """
( (S
    (NP-SBJ-1 (NNP John) )
    (VP (VBZ has)
      (NP (DT a) (NN dog) ))
    (. .) ))
( (S
    (NP-SBJ (-NONE- *-2) )
    (NP-TMP (NNP Monday) )
    (VP (VBD said)
      (SBAR (-NONE- 0)
        (S (NP-SBJ=3 (PRP it) )
          (VP (VBD rose)
            (PP-EXT (-LRB- -LRB-) (CD 5) (NN %) (-RRB- -RRB-) )))))
    (, ,) (`` ``) (NP (NNS shares) ) ('' '') (. .) ))
"""


def test_reads_every_tree_without_the_outer_bracket():
    first, second = trees.read_trees(MRG_TEXT)
    assert first.label == "S" and second.label == "S"
    assert trees.words(first) == ["John", "has", "a", "dog", "."]
    assert first.children[0] == Tree("NP-SBJ-1", [("NNP", "John")])


def test_clean_removes_traces_empty_constituents_and_function_tags():
    tree = trees.clean(trees.read_trees(MRG_TEXT)[1])
    assert trees.to_bracketed(tree) == (
        "(S (NP (NNP Monday)) (VP (VBD said) (SBAR (S (NP (PRP it)) (VP (VBD rose) "
        "(PP (-LRB- -LRB-) (CD 5) (NN %) (-RRB- -RRB-)))))) (, ,) (`` ``) (NP (NNS shares)) ('' '') (. .))"
    )


def test_function_tags():
    assert trees.strip_function_tags("NP-SBJ-1") == "NP"
    assert trees.strip_function_tags("NP=2") == "NP"
    assert trees.strip_function_tags("PP-LOC-CLR") == "PP"
    assert trees.strip_function_tags("-LRB-") == "-LRB-"
    assert trees.strip_function_tags("-NONE-") == "-NONE-"


def test_linearization_of_the_papers_example():
    # Vinyals & Kaiser et al. (2015), Figure 2, with POS tags normalized to XX.
    tree = trees.read_trees("(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))")[0]
    assert trees.linearize(tree) == "(S (NP XX )NP (VP XX (NP XX XX )NP )VP . )S"


def test_punctuation_tags_survive_linearization_other_tags_become_xx():
    tree = trees.clean(trees.read_trees(MRG_TEXT)[1])
    assert trees.linearize(tree) == (
        "(S (NP XX )NP (VP XX (SBAR (S (NP XX )NP (VP XX (PP XX XX XX XX )PP )VP )S )SBAR )VP , `` (NP XX )NP '' . )S"
    )


def test_tree_to_linearization_to_tree_is_exact():
    for tree in trees.read_trees(MRG_TEXT):
        tree = trees.clean(tree)
        rebuilt = trees.delinearize(trees.linearize(tree), trees.words(tree))
        assert rebuilt == trees.normalize_tags(tree)
        assert trees.words(rebuilt) == trees.words(tree)


def test_an_outer_bracket_over_several_constituents_becomes_top():
    """Some treebank trees put two constituents under the empty outer bracket; both must round-trip."""
    (tree,) = trees.read_trees("( (S (NP (NN a)) (VP (VBZ runs))) (. .) )")
    assert tree.label == "TOP" and [child.label if isinstance(child, Tree) else child for child in tree.children] == [
        "S",
        (".", "."),
    ]
    assert trees.linearize(tree) == "(TOP (S (NP XX )NP (VP XX )VP )S . )TOP"
    assert trees.delinearize(trees.linearize(tree), trees.words(tree)) == trees.normalize_tags(tree)


@pytest.mark.parametrize(
    "text, words, message",
    [
        ("(S (NP XX )VP )S", ["a"], "expected"),
        ("(S (NP XX )NP", ["a"], "never closed"),
        ("(S XX XX )S", ["a"], "more leaves"),
        ("(S XX )S", ["a", "b"], "1 leaves for 2 words"),
        ("(S XX )S (S XX )S", ["a", "b"], "continues after"),
        ("XX", ["a"], "outside any bracket"),
    ],
)
def test_delinearize_rejects_malformed_text(text, words, message):
    with pytest.raises(ValueError, match=message):
        trees.delinearize(text, words)


def test_unbalanced_treebank_text_names_the_source():
    with pytest.raises(ValueError, match="wsj_0001.mrg.*never closed"):
        trees.read_trees("( (S (NP (NN dog) )", source="wsj_0001.mrg")
    with pytest.raises(ValueError, match="unbalanced"):
        trees.read_trees(")")
