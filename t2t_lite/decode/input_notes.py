"""What the decoder says about its inputs: which lines it cut, and which it read beyond what it was trained on.

Nothing is cut unless asked (`max_input_size`), and nothing cut or extrapolated goes unsaid:
`truncation_note` names the lines cut, `longer_than_trained_note` those read whole although
longer than the longest example trained on (`max_input_ids`), `longer_than_limit_note` the same of
scored targets and target prefixes, `input_note` one sentence's cut.
"""

from t2t_lite.decode.decode_settings import DecodeHParams


def truncation_note(translations, settings: DecodeHParams, noun: str = "input line", shown: int = 5) -> str:
    """A line naming the inputs cut to max_input_size ("" if none was), so no cut goes unsaid."""
    numbers = [number for number, translation in enumerate(translations, start=1) if translation.truncated]
    if not numbers:
        return ""
    nouns, listed = _listed(numbers, noun, shown)
    return (
        f"Truncated {len(numbers)} {nouns} to their first {settings.max_input_size - 1} ids and EOS "
        f"(--decode_hparams max_input_size={settings.max_input_size}): {nouns} {listed}."
    )


def max_input_ids(model, hparams, settings: DecodeHParams) -> tuple:
    """(the most ids, EOS included, a sentence may have, why): the page refuses longer ones.

    max_input_size if --decode_hparams sets it; else a learned position table's size less
    extra_length (pos=emb); else the longest example the model was trained on (hparams
    max_length, 0 meaning batch_size as in training), as longer sentences are extrapolation.
    """
    if settings.max_input_size:
        return settings.max_input_size, "--decode_hparams max_input_size"
    position = getattr(model, "source_position", None)
    if position is not None and position.kind == "emb":
        return position.max_positions - settings.search.extra_length, "the learned position table less extra_length"
    return hparams.max_length or hparams.batch_size, "the longest example it was trained on, hparams max_length"


def longer_than_trained_note(translations, limit: int, reason: str, noun: str = "input line", shown: int = 5) -> str:
    """A warning naming the inputs longer than `limit` ids that were read whole ("" if none was).

    Beyond the longest example trained on, a model extrapolates (positions it never saw, attention
    over more keys than ever): the translation may still be good, but the user should know which.
    """
    lengths = [0 if translation.truncated else len(translation.source_ids) for translation in translations]
    return longer_than_limit_note(
        lengths,
        limit,
        reason,
        noun,
        f"and were read whole: {{listed}}. Their translations are extrapolation; "
        f"--decode_hparams=max_input_size={limit} would cut them instead.",
        shown,
    )


def longer_than_limit_note(lengths, limit: int, reason: str, noun: str, consequence: str, shown: int = 5) -> str:
    """A warning naming the items (numbered from 1) of more than `limit` ids, EOS included ("" if none).

    `consequence` ends the line; its `{listed}` becomes the nouns and their numbers. What
    `longer_than_trained_note` says of decoded lines, and t2t-decoder of the targets of --score_file
    and the lines of --target_prefix_file, which no setting cuts.
    """
    numbers = [number for number, length in enumerate(lengths, start=1) if length > limit]
    if not numbers:
        return ""
    nouns, listed = _listed(numbers, noun, shown)
    return (
        f"Warning: {len(numbers)} {nouns} had more than {limit} ids (EOS included), more than {reason} ({limit}), "
        + consequence.format(listed=f"{nouns} {listed}")
    )


def empty_sides_note(pairs, shown: int = 5) -> str:
    """A line naming the --score_file pairs with an empty side, and how they were scored ("" if none has)."""
    said = []
    for side, name, meaning in (
        (1, "target", "as log P(EOS | source), the probability of translating to nothing"),
        (0, "source", "as the decoder reads an empty line, EOS alone"),
    ):
        numbers = [number for number, pair in enumerate(pairs, start=1) if not pair[side].strip()]
        if numbers:
            nouns, listed = _listed(numbers, "line", shown)
            said.append(f"{len(numbers)} empty {name}{'s' if len(numbers) > 1 else ''} {meaning} ({nouns} {listed})")
    return f"Scored {'; '.join(said)}." if said else ""


def input_note(translation) -> str:
    """Says that the model read a cut input of a `Translation` ("" if it read all of it)."""
    if not translation.truncated:
        return ""
    return (
        f"The input had {translation.source_length} ids (EOS included); the model read its first "
        f"{len(translation.source_ids) - 1} and EOS (max_input_size)."
    )


def _listed(numbers: list, noun: str, shown: int) -> tuple:
    """(the noun, plural for several; the first `shown` line numbers, "and N more" for the rest)."""
    listed = ", ".join(map(str, numbers[:shown]))
    if len(numbers) > shown:
        listed += f" and {len(numbers) - shown} more"
    return (noun if len(numbers) == 1 else noun + "s"), listed
