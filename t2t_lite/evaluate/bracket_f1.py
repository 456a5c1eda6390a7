"""Constituency parsing evaluation for §6.3 (Table 4): labeled bracket F1 as EVALB scores it.

The decoder emits linearized trees (`t2t_lite.data.trees.linearize`), which may be
malformed. As Vinyals, Kaiser et al. (2015) do, `repair` makes every output a tree
before scoring: closing brackets that close nothing are dropped (a closing bracket
whose label differs from the open constituent closes that constituent), missing
closing brackets are added at the end, tokens after the first complete tree are
dropped, and the number of leaves is fixed to the sentence length (extra leaves
dropped from the end, missing ones added at the end of the root; constituents left
without leaves are removed). The gold tree's words are then put at the leaves.

Scoring follows EVALB with the standard COLLINS.prm:
  * a bracket is (label, first word, last word) of every constituent above the
    part-of-speech level; the root's TOP/ROOT/empty bracket does not count;
  * words whose GOLD tag is punctuation ( `` '' . : , ) are removed before spans are
    measured (so brackets differing only in punctuation match); a bracket that then
    covers no word is not counted;
  * ADVP and PRT are the same label;
  * brackets are multisets: a unary chain NP -> NP counts twice and matches twice;
  * precision = matched / predicted brackets and recall = matched / gold brackets,
    summed over the corpus; F1 = 2PR / (P + R).
"""

import collections
import dataclasses

from t2t_lite.data import text_lines, trees

ROOT_LABELS = frozenset({"", "TOP", "ROOT"})
EQUIVALENT_LABELS = {"PRT": "ADVP"}  # COLLINS.prm: EQ_LABEL ADVP PRT
DEFAULT_ROOT = "S"  # The root of a repaired output that had no bracket at all.


class ParseEvalError(ValueError):
    """Decoded and gold files that cannot be scored against each other."""


@dataclasses.dataclass(frozen=True)
class BracketScore:
    """Bracket counts of one sentence or a corpus; percentages on a 0–100 scale."""

    matched: int = 0
    predicted: int = 0
    gold: int = 0

    def __add__(self, other):
        return BracketScore(self.matched + other.matched, self.predicted + other.predicted, self.gold + other.gold)

    @property
    def precision(self) -> float:
        return 100.0 * self.matched / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return 100.0 * self.matched / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0


@dataclasses.dataclass(frozen=True)
class ParseReport:
    score: BracketScore
    sentences: int
    repaired: int  # decoded lines that were not well-formed trees of the right length

    def __str__(self) -> str:
        s = self.score
        return (
            f"Bracketing precision = {s.precision:.2f}  recall = {s.recall:.2f}  F1 = {s.f1:.2f}  "
            f"(EVALB COLLINS.prm; matched {s.matched}, predicted {s.predicted}, gold {s.gold})\n"
            f"sentences = {self.sentences}, repaired outputs = {self.repaired}"
        )


def evaluate_files(decoded_path: str, gold_path: str) -> ParseReport:
    """Scores one decoded linearized tree per line against the bracketed gold trees."""
    decoded = text_lines.read_lines(decoded_path)
    gold = [trees.clean(tree) for tree in trees.read_trees(text_lines.read_text(gold_path), source=gold_path)]
    if len(decoded) != len(gold):
        raise ParseEvalError(
            f"--decoded_trees={decoded_path} has {len(decoded)} lines but "
            f"--gold_trees={gold_path} has {len(gold)} trees; they must correspond one to one."
        )
    return evaluate(decoded, gold)


def evaluate(decoded_lines: list, gold_trees: list) -> ParseReport:
    total, repaired = BracketScore(), 0
    for line, gold in zip(decoded_lines, gold_trees):
        sentence_words = trees.words(gold)
        text = repair(line, len(sentence_words))
        repaired += text != " ".join(line.split())
        total += score_tree(trees.delinearize(text, sentence_words), gold)
    return ParseReport(total, len(gold_trees), repaired)


# -- Repairing decoded outputs -------------------------------------------------------------------


def repair(text: str, num_words: int) -> str:
    """A well-formed linearization of `text` with exactly `num_words` leaves."""
    if num_words < 1:
        raise ParseEvalError("cannot score a sentence of no words.")
    tokens = _balance(text.split())
    tokens = _fix_leaf_count(tokens, num_words)
    return " ".join(_drop_empty_constituents(tokens))


def _is_open(token):
    return token.startswith("(") and len(token) > 1


def _is_close(token):
    return token.startswith(")") and len(token) > 1


def _balance(tokens):
    balanced, stack = [], []
    for token in tokens:
        if _is_open(token):
            stack.append(token[1:])
            balanced.append(token)
        elif _is_close(token):
            if stack:  # an unmatched closing bracket closes nothing and is dropped
                balanced.append(")" + stack.pop())
                if not stack:
                    break  # the tree is complete; what follows is not part of it
        elif stack:  # a leaf outside every bracket is dropped
            balanced.append(token)
    if not balanced:
        stack.append(DEFAULT_ROOT)
        balanced.append("(" + DEFAULT_ROOT)
    return balanced + [")" + label for label in reversed(stack)]


def _fix_leaf_count(tokens, num_words):
    leaves = [position for position, token in enumerate(tokens) if not _is_open(token) and not _is_close(token)]
    if len(leaves) > num_words:
        extra = set(leaves[num_words:])
        return [token for position, token in enumerate(tokens) if position not in extra]
    return tokens[:-1] + [trees.NORMALIZED_TAG] * (num_words - len(leaves)) + tokens[-1:]


def _drop_empty_constituents(tokens):
    kept = []
    for token in tokens:
        if _is_close(token) and kept and _is_open(kept[-1]):
            kept.pop()
        else:
            kept.append(token)
    return kept


# -- EVALB scoring -------------------------------------------------------------------------------


def score_tree(predicted: trees.Tree, gold: trees.Tree) -> BracketScore:
    """Matched, predicted and gold bracket counts of one sentence (same words in both trees)."""
    # The linearization keeps exactly the punctuation tags and writes XX for every other leaf.
    gold_leaf_tags = [token for token in trees.linearize(gold).split() if not _is_open(token) and not _is_close(token)]
    kept = [tag not in trees.PUNCTUATION_TAGS for tag in gold_leaf_tags]
    predicted_brackets, gold_brackets = brackets(predicted, kept), brackets(gold, kept)
    matched = sum((predicted_brackets & gold_brackets).values())
    return BracketScore(matched, sum(predicted_brackets.values()), sum(gold_brackets.values()))


def brackets(tree: trees.Tree, kept: list) -> collections.Counter:
    """Multiset of (label, start, end) over the words whose flag in `kept` is True."""
    counts = collections.Counter()
    _collect(tree, kept, 0, counts, is_root=True)
    return counts


def _collect(tree, kept, first_leaf, counts, is_root=False):
    """Adds tree's brackets to counts; returns (leaves covered, kept words covered)."""
    leaves = words = 0
    for child in tree.children:
        if trees.is_leaf(child):
            words += kept[first_leaf + leaves]
            leaves += 1
        else:
            child_leaves, child_words = _collect(child, kept, first_leaf + leaves, counts)
            leaves, words = leaves + child_leaves, words + child_words
    if words and not (is_root and tree.label in ROOT_LABELS):
        start = sum(kept[:first_leaf])
        counts[(EQUIVALENT_LABELS.get(tree.label, tree.label), start, start + words)] += 1
    return leaves, words
