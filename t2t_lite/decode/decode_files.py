"""What `t2t-decoder` reads and writes: a text file, a problem's generated split, or lines typed on stdin (§6.1).

Outputs are written through a temporary file (`<output>.tmp`) and renamed, so an interrupted run
never leaves a half-written file; one output line per input line, in the input's order. A write
that fails (a full disk) or is interrupted removes its temporary file; one a kill -9 left is removed,
with a line, by the next run that writes the same output. `decode_split` also
writes the split's sources and references, so `t2t-bleu` scores the run.
"""

import os
import sys

from t2t_lite.data import datagen, whole_files
from t2t_lite.decode import input_notes
from t2t_lite.decode.decode_settings import DecodeHParams
from t2t_lite.decode.encoded_inputs import BadInputError
from t2t_lite.decode.translation import translate


def default_output_path(
    input_path: str, model_name: str, hparams_set: str, problem_name: str, settings: DecodeHParams
) -> str:
    """tensor2tensor's name for the decodes of --decode_from_file without --decode_to_file."""
    return (
        f"{input_path}.{model_name}.{hparams_set or 'hparams'}.{problem_name}"
        f".beam{settings.search.beam_size}.alpha{settings.search.alpha}.decodes"
    )


def write_lines(path: str, lines) -> None:
    """Writes through a temporary file, so an interrupted run never leaves a half-written output."""
    temporary = path + ".tmp"
    if os.path.exists(temporary):
        os.remove(temporary)
        print(f"Removed {temporary}: left unfinished by an interrupted t2t-decoder.", file=sys.stderr)
    try:
        with whole_files.naming(path), open(temporary, "w", encoding="utf-8") as file:
            for line in lines:
                file.write(line.replace("\n", " ") + "\n")
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def decode_split(
    model,
    problem,
    data_dir: str,
    split: str,
    settings: DecodeHParams,
    output_path: str,
    *,
    progress: bool = True,
) -> list:
    """Decodes the `split` examples of a generated problem; writes `.decodes`, `.inputs` and `.targets` files.

    The inputs and targets are the detokenized ids of the TFRecords, i.e. the
    problem's normalised text, so `t2t-bleu --translation=X.decodes --reference=X.targets`
    scores the run.
    """
    vocabulary = problem.vocabulary(data_dir)
    if split == "train":  # a damaged shard stops it, named (Problem.dataset checks the other splits itself)
        datagen.check_shards(datagen.complete_shards(data_dir, problem.base_name, split))
    sources, references = [], []
    for example in problem.dataset(split, data_dir).as_numpy_iterator():
        sources.append(vocabulary.decode(example["inputs"]))
        references.append(vocabulary.decode(example["targets"]))
    translations = translate(model, vocabulary, sources, settings, progress=progress)
    _, inputs_path, targets_path = split_output_paths(output_path)
    write_lines(output_path, (translation.line(settings.writes_several) for translation in translations))
    write_lines(inputs_path, sources)
    write_lines(targets_path, references)
    return translations


def split_output_paths(output_path: str) -> tuple:
    """(decodings, sources, references): the files `decode_split` writes for `output_path` (X.decodes)."""
    base = output_path[: -len(".decodes")] if output_path.endswith(".decodes") else output_path
    return output_path, base + ".inputs", base + ".targets"


def decode_interactive(model, vocabulary, settings: DecodeHParams, stdin=sys.stdin, stdout=sys.stdout) -> None:
    """Reads a sentence per line from stdin and prints its decoding, until end of input."""
    for line in stdin:
        try:
            translation = translate(model, vocabulary, [line.rstrip("\n")], settings, progress=False)[0]
        except BadInputError as error:  # one bad line ends no session
            print(str(error).replace("input line 1", "this line"), file=sys.stderr, flush=True)
            continue
        if translation.truncated:
            print(input_notes.input_note(translation), file=sys.stderr, flush=True)
        print(translation.line(settings.writes_several), file=stdout, flush=True)
