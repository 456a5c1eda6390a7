"""Constituency parsing evaluation for §6.3 (Table 4): labeled bracket F1 as EVALB scores it.

The decoder emits linearized trees (`t2t_lite.data.trees.linearize`), which may be
malformed. As Vinyals, Kaiser et al. (2015) do, `repair` makes every output a tree
before scoring: closing brackets that close nothing are dropped (a closing bracket
whose label differs from the open constituent closes that constituent), missing
closing brackets are added at the end, tokens after the first complete tree are
dropped, and the number of leaves is fixed to the sentence length (extra leaves
dropped from the end, missing ones added at the end of the root; constituents left
without leaves are removed). The gold tree's words are then put at the leaves.

Either file may hold linearized trees, one per line (t2t-decoder's output, the
`.targets` it writes beside it), or bracketed Penn Treebank trees (the treebank's
`.mrg` files, one tree per line or spread over lines, as other parsers write them):
a file with a bare closing bracket `)` is bracketed, any other linearized (its
brackets close as `)NP`, and a truncated output may close none).
Bracketed predictions are scored as they are (no repair), their function tags and
indices stripped as the gold ones are (`NP-SBJ-1`, `PP-LOC=2` -> `NP`, `PP`, as
EVALB's own label trimming does), traces removed.

Scoring follows EVALB with the standard COLLINS.prm:
  * a bracket is (label, first word, last word) of every constituent above the
    part-of-speech level;
  * the root: a root labelled TOP is not scored (COLLINS.prm: DELETE_LABEL TOP), and
    so are a root labelled ROOT (Stanford's) and the treebank's empty outer bracket
    `( (S ...) )`, which `read_trees` removes. EVALB itself would count those two as
    one more sentence-long bracket on each side that has it: rename ROOT to TOP to
    get EVALB's figure for a file that has it;
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
import re

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


_BARE_CLOSING_BRACKET = re.compile(r"\)(?=[\s)]|$)")


def is_linearized(text: str) -> bool:
    """False for bracketed trees, which close with a bare `)`; a linearization closes with `)LABEL` only."""
    return not _BARE_CLOSING_BRACKET.search(text)


def evaluate_files(decoded_path: str, gold_path: str) -> ParseReport:
    """Scores the decoded trees against the gold trees, each file linearized or bracketed."""
    gold = read_gold_trees(gold_path)
    decoded_text = text_lines.read_text(decoded_path)
    if is_linearized(decoded_text):
        decoded = text_lines.read_lines(decoded_path)
        _check_counts(decoded_path, len(decoded), "lines", gold_path, len(gold))
        return evaluate(decoded, gold)
    predicted = [_cleaned(tree, decoded_path) for tree in trees.read_trees(decoded_text, source=decoded_path)]
    _check_counts(decoded_path, len(predicted), "trees", gold_path, len(gold))
    return evaluate_trees(predicted, gold, decoded_path)


def read_gold_trees(path: str) -> list:
    """The gold trees of a bracketed file (cleaned as a parser's targets are) or of a linearized one."""
    text = text_lines.read_text(path)
    if not is_linearized(text):
        return [_cleaned(tree, path) for tree in trees.read_trees(text, source=path)]
    gold = []
    for number, line in enumerate(text_lines.read_lines(path), 1):
        leaves = [token for token in line.split() if not _is_open(token) and not _is_close(token)]
        try:  # the words are not needed to score: placeholders keep the leaf count
            gold.append(trees.delinearize(line, ["w"] * len(leaves)))
        except ValueError as error:
            raise ParseEvalError(f"--gold_trees={path} line {number}: not a well-formed tree: {error}") from None
    return gold


def _cleaned(tree, path):
    cleaned = trees.clean(tree)
    if cleaned is None:
        raise ParseEvalError(f"{path}: a tree holds nothing but traces: {trees.to_bracketed(tree)}")
    return cleaned


def _check_counts(decoded_path, decoded_count, unit, gold_path, gold_count):
    if decoded_count != gold_count:
        raise ParseEvalError(
            f"--decoded_trees={decoded_path} has {decoded_count} {unit} but "
            f"--gold_trees={gold_path} has {gold_count} trees; they must correspond one to one."
        )


def evaluate_trees(predicted_trees: list, gold_trees: list, source: str = "decoded") -> ParseReport:
    """Scores bracketed predictions as they are; each must have its gold tree's number of words."""
    total = BracketScore()
    for number, (predicted, gold) in enumerate(zip(predicted_trees, gold_trees), 1):
        predicted_words, gold_words = len(trees.words(predicted)), len(trees.words(gold))
        if predicted_words != gold_words:
            raise ParseEvalError(
                f"{source}: tree {number} has {predicted_words} words and its gold tree {gold_words}; "
                f"both must be parses of the same tokens."
            )
        total += score_tree(predicted, gold)
    return ParseReport(total, len(gold_trees), 0)


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
