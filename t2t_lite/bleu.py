"""BLEU and chrF of a translation against its reference (§6.1, Table 2).

Three figures, for three different purposes:

* **sacreBLEU** (Post 2018) on detokenized text, with its signature: the headline
  figure, comparable across papers and systems because the signature pins the
  tokenization, casing and smoothing.
* **chrF** (Popović 2015), also through sacrebleu, with its signature.
* **Tokenized BLEU as the paper computed it** — NOT comparable with sacreBLEU. The
  paper's EN-DE figures come from tensor2tensor's `get_ende_bleu.sh`: tokenize, split
  hyphenated compounds (`perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'`), then
  `multi-bleu.perl`. Here the tokenizer is tensor2tensor's `bleu_hook.bleu_tokenize`
  (mteval-v14's international tokenization: split off every Unicode punctuation mark
  not between two digits, and every symbol) applied after the compound splitting, and
  the n-gram statistics are multi-bleu's (case-sensitive, corpus-level, no smoothing).
  Splitting compounds turns one German word into three tokens and raises the score,
  which is why this figure reads higher than sacreBLEU's.
"""

import dataclasses
import functools
import re
import sys
import unicodedata

from sacrebleu.metrics import BLEU, CHRF

from t2t_lite.text_lines import read_lines

# get_ende_bleu.sh's compound splitting; the marker is restored after tokenization (see
# `paper_tokenize`) because the tokenizer would otherwise cut "##AT##-##AT##" apart.
_COMPOUND_HYPHEN = re.compile(r"(\S)-(\S)")
_COMPOUND_MARKER = "##AT##-##AT##"
_MARKER_PLACEHOLDER = "tttlitecompoundhyphen"  # letters only: the tokenizer leaves it whole


class LineCountError(ValueError):
    """The translation and the reference do not have the same number of lines."""


@dataclasses.dataclass(frozen=True)
class BleuReport:
    """Every figure `t2t-bleu` prints; BLEU and chrF on a 0–100 scale."""

    sacrebleu: float
    sacrebleu_signature: str
    chrf: float
    chrf_signature: str
    paper_bleu: float
    paper_bleu_uncased: float
    lines: int

    def __str__(self) -> str:
        return "\n".join([
            f"sacreBLEU = {self.sacrebleu:.2f}  ({self.sacrebleu_signature})",
            f"chrF2 = {self.chrf:.2f}  ({self.chrf_signature})",
            f"BLEU tokenized as in the paper (t2t bleu_tokenize + ##AT## compound splitting; "
            f"not comparable with sacreBLEU) = {self.paper_bleu:.2f}  (uncased {self.paper_bleu_uncased:.2f})",
            f"lines = {self.lines}",
        ])


def evaluate_files(translation_path: str, reference_path: str) -> BleuReport:
    """Scores the lines of `translation_path` against those of `reference_path` (one reference)."""
    translation, reference = read_lines(translation_path), read_lines(reference_path)
    if len(translation) != len(reference):
        raise LineCountError(
            f"--translation={translation_path} has {len(translation)} lines but "
            f"--reference={reference_path} has {len(reference)}; line i of one must translate line i "
            f"of the other.")
    return evaluate(translation, reference)


def evaluate(translation: list, reference: list) -> BleuReport:
    """All figures for detokenized translation lines against reference lines."""
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(translation, [reference])
    chrf_score = chrf.corpus_score(translation, [reference])
    return BleuReport(
        sacrebleu=bleu_score.score, sacrebleu_signature=str(bleu.get_signature()),
        chrf=chrf_score.score, chrf_signature=str(chrf.get_signature()),
        paper_bleu=paper_bleu(translation, reference),
        paper_bleu_uncased=paper_bleu(translation, reference, lowercase=True),
        lines=len(translation))


# -- The paper's tokenized BLEU ------------------------------------------------------------------

def paper_bleu(translation: list, reference: list, lowercase: bool = False) -> float:
    """multi-bleu.perl's corpus BLEU (0–100) over `paper_tokenize`d lines."""
    join = lambda lines: [" ".join(paper_tokenize(line.lower() if lowercase else line)) for line in lines]
    scorer = BLEU(tokenize="none", smooth_method="none", force=True)
    return scorer.corpus_score(join(translation), [join(reference)]).score


def paper_tokenize(text: str) -> list:
    """get_ende_bleu.sh's compound splitting, then tensor2tensor's `bleu_tokenize`."""
    text = _COMPOUND_HYPHEN.sub(rf"\1 {_MARKER_PLACEHOLDER} \2", text)
    return [_COMPOUND_MARKER if token == _MARKER_PLACEHOLDER else token for token in bleu_tokenize(text)]


def bleu_tokenize(text: str) -> list:
    """tensor2tensor's `bleu_hook.bleu_tokenize` (mteval-v14.pl's international tokenization).

    Punctuation is split off unless it sits between digits ("1,000.5" stays whole), and
    every symbol is split off. As in mteval, a number followed by a final full stop keeps
    it ("in 2017." -> "in", "2017.").
    """
    patterns = _unicode_patterns()
    text = patterns["nondigit_punct"].sub(r"\1 \2 ", text)
    text = patterns["punct_nondigit"].sub(r" \1 \2", text)
    text = patterns["symbol"].sub(r" \1 ", text)
    return text.split()


@functools.lru_cache(maxsize=None)
def _unicode_patterns() -> dict:
    # Built once on first use: listing every Unicode punctuation and symbol takes ~1 s.
    punctuation, symbols = _characters_of_category("P"), _characters_of_category("S")
    return {
        "nondigit_punct": re.compile(r"([^\d])([" + punctuation + r"])"),
        "punct_nondigit": re.compile(r"([" + punctuation + r"])([^\d])"),
        "symbol": re.compile("([" + symbols + "])"),
    }


def _characters_of_category(prefix: str) -> str:
    return re.escape("".join(chr(code) for code in range(sys.maxunicode)
                             if unicodedata.category(chr(code)).startswith(prefix)))
