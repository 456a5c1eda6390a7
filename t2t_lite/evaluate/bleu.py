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

`evaluate_steps` scores a directory of translations by checkpoint step (the files
`t2t-translate-all` writes, `<source>-<step>` and `<source>-avg<N>-<step>`): a table,
TensorBoard scalars (`write_events`, as tensor2tensor's `t2t-bleu --event_dir`) and a
plot of sacreBLEU against step (`plot_steps`, matplotlib, an optional extra).
"""

import dataclasses
import functools
import os
import re
import sys
import unicodedata

from sacrebleu.metrics import BLEU, CHRF

from t2t_lite.data.text_lines import read_lines

# get_ende_bleu.sh's compound splitting; the marker is restored after tokenization (see
# `paper_tokenize`) because the tokenizer would otherwise cut "##AT##-##AT##" apart.
_COMPOUND_HYPHEN = re.compile(r"(\S)-(\S)")
_COMPOUND_MARKER = "##AT##-##AT##"
_MARKER_PLACEHOLDER = "tttlitecompoundhyphen"  # letters only: the tokenizer leaves it whole
# t2t-translate-all's file names: <source>-<step>, or <source>-avg<N>-<step> for an average.
_STEP_FILE = re.compile(r"^(?P<source>.+?)(?:-avg(?P<average_of>\d+))?-(?P<step>\d+)$")


class LineCountError(ValueError):
    """The translation and the reference do not have the same number of lines, or have none."""


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
        return "\n".join(
            [
                f"sacreBLEU = {self.sacrebleu:.2f}  ({self.sacrebleu_signature})",
                f"chrF2 = {self.chrf:.2f}  ({self.chrf_signature})",
                f"BLEU tokenized as in the paper (t2t bleu_tokenize + ##AT## compound splitting; "
                f"not comparable with sacreBLEU) = {self.paper_bleu:.2f}  (uncased {self.paper_bleu_uncased:.2f})",
                f"lines = {self.lines}",
            ]
        )


def evaluate_files(translation_path: str, reference_path: str) -> BleuReport:
    """Scores the lines of `translation_path` against those of `reference_path` (one reference)."""
    reference = read_lines(reference_path)
    return evaluate(_translation_lines(translation_path, reference, reference_path), reference)


def _translation_lines(translation_path: str, reference: list, reference_path: str) -> list:
    translation = read_lines(translation_path)
    if len(translation) != len(reference):
        raise LineCountError(
            f"{translation_path} has {len(translation)} lines but --reference={reference_path} has "
            f"{len(reference)}; line i of one must translate line i of the other."
        )
    if not reference:  # sacrebleu has nothing to average over
        raise LineCountError(
            f"{translation_path} and --reference={reference_path} are empty: there is no line to score."
        )
    return translation


def evaluate(translation: list, reference: list) -> BleuReport:
    """All figures for detokenized translation lines against reference lines."""
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(translation, [reference])
    chrf_score = chrf.corpus_score(translation, [reference])
    return BleuReport(
        sacrebleu=bleu_score.score,
        sacrebleu_signature=str(bleu.get_signature()),
        chrf=chrf_score.score,
        chrf_signature=str(chrf.get_signature()),
        paper_bleu=paper_bleu(translation, reference),
        paper_bleu_uncased=paper_bleu(translation, reference, lowercase=True),
        lines=len(translation),
    )


# -- The paper's tokenized BLEU ------------------------------------------------------------------


def paper_bleu(translation: list, reference: list, lowercase: bool = False) -> float:
    """multi-bleu.perl's corpus BLEU (0–100) over `paper_tokenize`d lines."""

    def join(lines):
        return [" ".join(paper_tokenize(line.lower() if lowercase else line)) for line in lines]

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
    return re.escape(
        "".join(chr(code) for code in range(sys.maxunicode) if unicodedata.category(chr(code)).startswith(prefix))
    )


# -- Scores by checkpoint step, for t2t-bleu --translations_dir ---------------------------------


@dataclasses.dataclass(frozen=True)
class StepScore:
    """The scores of one file of a translations directory."""

    step: int
    average_of: int  # 0: a single checkpoint; N: the average of the last N checkpoints up to `step`
    path: str
    report: BleuReport

    @property
    def label(self) -> str:
        return f"avg{self.average_of} @ {self.step}" if self.average_of else str(self.step)


def step_files(translations_dir: str) -> list:
    """(step, average_of, path) of every translation file in the directory, single checkpoints first, by step.

    Files of translations of several sources in one directory would mix two curves, so
    they are refused.
    """
    found, sources = [], set()
    for name in sorted(os.listdir(translations_dir)):
        match = _STEP_FILE.match(name)
        if match and os.path.isfile(os.path.join(translations_dir, name)):
            sources.add(match["source"])
            found.append((int(match["step"]), int(match["average_of"] or 0), os.path.join(translations_dir, name)))
    if len(sources) > 1:
        raise ValueError(
            f"--translations_dir={translations_dir} holds translations of several sources "
            f"({', '.join(sorted(sources))}); give each source its own directory."
        )
    if not found:
        raise ValueError(
            f"--translations_dir={translations_dir}: no translation files named <source>-<step> "
            f"(as t2t-translate-all writes them)."
        )
    return sorted(found, key=lambda item: (item[1], item[0]))


def evaluate_steps(translations_dir: str, reference_path: str) -> list:
    """A `StepScore` for each translation file of `translations_dir` against the reference."""
    reference = read_lines(reference_path)
    return [
        StepScore(step, average_of, path, evaluate(_translation_lines(path, reference, reference_path), reference))
        for step, average_of, path in step_files(translations_dir)
    ]


def format_table(scores: list) -> str:
    """One row per file (step, sacreBLEU, chrF2), then the two signatures once."""
    rows = [f"{'step':>14}  {'sacreBLEU':>9}  {'chrF2':>6}"]
    rows += [f"{score.label:>14}  {score.report.sacrebleu:9.2f}  {score.report.chrf:6.2f}" for score in scores]
    rows += [f"sacreBLEU: {scores[0].report.sacrebleu_signature}", f"chrF2: {scores[0].report.chrf_signature}"]
    return "\n".join(rows)


def write_events(scores: list, event_dir: str) -> None:
    """TensorBoard scalars `sacreBLEU` and `chrF2` at each step (`…_avg<N>` for averages) in event_dir."""
    import tensorflow as tf  # only for --event_dir: t2t-bleu otherwise starts without TensorFlow

    from t2t_lite.run_dir.scalars import write_scalars  # the trainer's scalars: no tensorboard package needed

    writer = tf.summary.create_file_writer(event_dir)
    for score in scores:
        suffix = f"_avg{score.average_of}" if score.average_of else ""
        write_scalars(
            writer, score.step, {"sacreBLEU" + suffix: score.report.sacrebleu, "chrF2" + suffix: score.report.chrf}
        )
    writer.close()


def plot_steps(scores: list, path: str) -> None:
    """A PNG of sacreBLEU against step; averaged checkpoints are drawn as stars at their last step.

    Raises ImportError when matplotlib (the optional `plot` extra) is missing.
    """
    try:
        import matplotlib
    except ImportError:
        raise ImportError("matplotlib is not installed (pip install matplotlib, the [plot] extra)") from None
    matplotlib.use("Agg")  # a file only: works without a display
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.2))
    single = [score for score in scores if not score.average_of]
    if single:
        axes.plot([s.step for s in single], [s.report.sacrebleu for s in single], "o-", label="checkpoint")
    for average_of in sorted({score.average_of for score in scores} - {0}):
        averaged = [score for score in scores if score.average_of == average_of]
        axes.plot(
            [s.step for s in averaged],
            [s.report.sacrebleu for s in averaged],
            "*",
            markersize=14,
            label=f"average of the last {average_of}",
        )
    axes.set_xlabel("training step")
    axes.set_ylabel("sacreBLEU")
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
