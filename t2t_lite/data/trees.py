"""Constituency trees for parsing as translation (§6.3, after Vinyals & Kaiser et al. 2015).

§6.3 trains the Transformer on the WSJ Penn Treebank with the target side the
linearized tree of "Grammar as a Foreign Language" (Vinyals, Kaiser et al. 2015):
a depth-first walk that writes "(LABEL" on entering a constituent, ")LABEL" on
leaving it, and one token per word in place of the word itself:

    (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))
    -> "(S (NP XX )NP (VP XX (NP XX XX )NP )VP . )S"      words: John has a dog .

Part-of-speech tags become XX, except the punctuation tags that EVALB leaves
unscored (`PUNCTUATION_TAGS`), which stay as they are so that a scorer can still
recognise punctuation in a predicted tree. The words go to the encoder, so
`delinearize(linearize(tree), words(tree))` gives back `normalize_tags(tree)`.

A `Tree` is deliberately plain: a `label` and a list of `children`, each a `Tree`
or a leaf. A leaf is a `(tag, word)` tuple (a preterminal of the treebank) or a
bare string (a word whose tag is unknown). `read_trees` parses the bracketed text
of `.mrg` files: several trees per file, each inside the treebank's outer bracket
with an empty label, `( (S ...) )`. `clean` removes what a parser is not asked to
predict: -NONE- traces (and constituents left empty by removing them) and function
tags and indices (NP-SBJ-1 -> NP, NP=2 -> NP), keeping -LRB-/-RRB- whole.
"""

import dataclasses
import re

NORMALIZED_TAG = "XX"
# The tags EVALB's standard parameter file (COLLINS.prm) deletes before scoring.
PUNCTUATION_TAGS = frozenset({",", ":", "``", "''", "."})
TRACE_TAG = "-NONE-"
# The constituent labels of the Penn Treebank II bracketing guidelines (Bies et al. 1995), and TOP,
# the root `read_trees` names when the outer bracket holds several constituents.
TREEBANK_LABELS = frozenset(
    "ADJP ADVP CONJP FRAG INTJ LST NAC NP NX PP PRN PRT QP RRC S SBAR SBARQ SINV SQ UCP VP "
    "WHADJP WHADVP WHNP WHPP X TOP".split()
)
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclasses.dataclass
class Tree:
    """A constituent: its label and its children (`Tree`s, `(tag, word)` leaves or word strings)."""

    label: str
    children: list

    def __str__(self) -> str:
        return to_bracketed(self)


def is_leaf(node) -> bool:
    return not isinstance(node, Tree)


def leaf_word(leaf) -> str:
    return leaf[1] if isinstance(leaf, tuple) else leaf


def words(tree: Tree) -> list:
    """The sentence: the words of the leaves from left to right."""
    return [leaf_word(node) for node in _leaves(tree)]


def _leaves(tree: Tree):
    for child in tree.children:
        if is_leaf(child):
            yield child
        else:
            yield from _leaves(child)


# -- Reading the Penn Treebank ------------------------------------------------------


def read_trees(text: str, source: str = "<string>") -> list:
    """All trees in bracketed text, each without the treebank's outer empty-label bracket."""
    tokens = _TOKEN.findall(text)
    trees = []
    position = 0
    while position < len(tokens):
        tree, position = _read_node(tokens, position, source)
        if is_leaf(tree):
            raise ValueError(f"{source}: expected a bracketed tree, found the word {leaf_word(tree)!r}.")
        trees.append(_strip_outer_bracket(tree))
    return trees


def _read_node(tokens, position, source):
    if tokens[position] != "(":
        if tokens[position] == ")":
            raise ValueError(f"{source}: unbalanced ')' at token {position}.")
        return tokens[position], position + 1
    position += 1
    label = ""
    if position < len(tokens) and tokens[position] not in "()":
        label = tokens[position]
        position += 1
    children = []
    while True:
        if position >= len(tokens):
            raise ValueError(f"{source}: a bracket opened with label {label!r} is never closed.")
        if tokens[position] == ")":
            break
        child, position = _read_node(tokens, position, source)
        children.append(child)
    position += 1
    if len(children) == 1 and isinstance(children[0], str):
        return (label, children[0]), position  # a preterminal: (TAG word)
    return Tree(label, children), position


def _strip_outer_bracket(tree):
    if tree.label in ("", "ROOT", "TOP") and len(tree.children) == 1 and not is_leaf(tree.children[0]):
        return tree.children[0]
    if tree.label == "":  # several constituents under the outer bracket: name it, or "(" would linearize unlabeled
        return Tree("TOP", tree.children)
    return tree


def clean(tree: Tree):
    """The tree without traces, empty constituents and function tags; None if nothing is left."""
    children = []
    for child in tree.children:
        if is_leaf(child):
            if not (isinstance(child, tuple) and child[0] == TRACE_TAG):
                children.append(child)
        else:
            kept = clean(child)
            if kept is not None:
                children.append(kept)
    if not children:
        return None
    return Tree(strip_function_tags(tree.label), children)


def strip_function_tags(label: str) -> str:
    """NP-SBJ-1 -> NP, NP=2 -> NP, PP-LOC-CLR -> PP; -LRB-, -RRB-, -NONE- stay whole."""
    if label.startswith("-") and label.endswith("-"):
        return label
    return re.split(r"[-=]", label, maxsplit=1)[0] or label


def to_bracketed(tree: Tree) -> str:
    """One-line PTB bracketing, `(S (NP (DT a) (NN dog)) ...)`."""
    parts = []
    for child in tree.children:
        if isinstance(child, tuple):
            parts.append(f"({child[0]} {child[1]})")
        elif is_leaf(child):
            parts.append(child)
        else:
            parts.append(to_bracketed(child))
    return f"({tree.label} {' '.join(parts)})"


# -- Linearization --------------------------------------------------------------------


def normalized_tag(tag: str) -> str:
    return tag if tag in PUNCTUATION_TAGS else NORMALIZED_TAG


def normalize_tags(tree: Tree) -> Tree:
    """The tree with every leaf `(normalized_tag(tag), word)`: what linearization keeps."""
    children = []
    for child in tree.children:
        if is_leaf(child):
            tag = child[0] if isinstance(child, tuple) else NORMALIZED_TAG
            children.append((normalized_tag(tag), leaf_word(child)))
        else:
            children.append(normalize_tags(child))
    return Tree(tree.label, children)


def linearize(tree: Tree) -> str:
    """The target sequence of Vinyals & Kaiser et al. (2015): `(S (NP XX XX )NP . )S`."""
    return " ".join(_linear_tokens(tree))


def _linear_tokens(tree: Tree):
    yield "(" + tree.label
    for child in tree.children:
        if is_leaf(child):
            yield normalized_tag(child[0]) if isinstance(child, tuple) else NORMALIZED_TAG
        else:
            yield from _linear_tokens(child)
    yield ")" + tree.label


def linearized_symbols() -> frozenset:
    """The tokens a linearization writes for structure: `(L` and `)L` of every treebank label, and XX.

    A subword vocabulary keeps each whole (`Vocabulary`'s whole pieces): a bracket
    cut into `(` and `NP` would make targets about 1.6 times as long.
    """
    return frozenset({NORMALIZED_TAG} | {f"{side}{label}" for label in TREEBANK_LABELS for side in "()"})


def delinearize(text: str, sentence_words) -> Tree:
    """The tree of a well-formed linearization, with `sentence_words` at its leaves.

    The exact inverse of `linearize` (up to `normalize_tags`). Raises ValueError,
    saying where, when brackets do not match, labels of an opening and its closing
    bracket differ, or the number of leaf tokens is not the number of words.
    """
    sentence_words = list(sentence_words)
    stack = []
    root = None
    next_word = 0
    for position, token in enumerate(text.split()):
        if root is not None:
            raise ValueError(f"token {position} {token!r}: text continues after the tree is complete.")
        if token.startswith("(") and len(token) > 1:
            stack.append(Tree(token[1:], []))
        elif token.startswith(")") and len(token) > 1:
            if not stack or stack[-1].label != token[1:]:
                expected = f"')' + {stack[-1].label!r}" if stack else "no closing bracket"
                raise ValueError(f"token {position} {token!r}: expected {expected}.")
            finished = stack.pop()
            if stack:
                stack[-1].children.append(finished)
            else:
                root = finished
        else:
            if not stack:
                raise ValueError(f"token {position} {token!r}: a leaf outside any bracket.")
            if next_word >= len(sentence_words):
                raise ValueError(f"token {position} {token!r}: more leaves than the {len(sentence_words)} words.")
            stack[-1].children.append((token, sentence_words[next_word]))
            next_word += 1
    if root is None:
        raise ValueError(f"{len(stack)} bracket(s) never closed in {text!r}." if stack else "empty linearization.")
    if next_word != len(sentence_words):
        raise ValueError(f"{next_word} leaves for {len(sentence_words)} words.")
    return root
