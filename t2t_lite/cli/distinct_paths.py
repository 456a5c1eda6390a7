"""No file a tool reads may be its output or another of its inputs, as the file system sees them.

A tool whose output is one of its inputs replaces the user's data with its results
(`t2t-decoder --score_file=pairs.tsv --decode_to_file=pairs.tsv`); two inputs that are one file
(`t2t-bleu --translation=x --reference=x`) give a figure that means nothing. So each tool names the
files (and directories) it reads and writes, and `check_distinct` compares every pair as the file
system sees them: after resolving symbolic links, `..` and relative paths (os.path.realpath), and, for
paths that exist, by device and inode (os.path.samefile: hard links). The first pair that is one
file stops the tool before any work, with both flags named.

Remote paths (gs://, s3://) are left out: only the local file system can be asked cheaply.
"""

import os

from t2t_lite.cli.flags import UsageError


def check_distinct(inputs: dict, outputs: dict = None) -> None:
    """Stops (UsageError) if two of `inputs` or `outputs` ({what: path}; None skipped) are one file.

    `what` is how the user names the path: a flag ("--score_file") or what a flag implies
    ("--data_dir's vocabulary").
    """
    named = [(what, path, False) for what, path in inputs.items() if path]
    named += [(what, path, True) for what, path in (outputs or {}).items() if path]
    named = [entry for entry in named if "://" not in entry[1]]
    for later, (what, path, written) in enumerate(named):
        for earlier_what, earlier_path, earlier_written in named[:later]:
            if _same(path, earlier_path):
                raise UsageError(_message(what, path, written, earlier_what, earlier_path, earlier_written))


def _same(first: str, second: str) -> bool:
    """Whether two paths name one file or directory (one that need not exist yet, for an output)."""
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    return os.path.exists(first) and os.path.exists(second) and os.path.samefile(first, second)


def _message(what, path, written, other_what, other_path, other_written) -> str:
    """The one line that names both, says what would go wrong and what to do."""
    if os.path.abspath(path) != os.path.abspath(other_path):
        what_it_is = f"{what}={path} is {other_what}={other_path} (the same file, through a link or another path)"
    else:
        what_it_is = f"{what}={path} is {other_what}"
    kind = "directory" if os.path.isdir(path) else "file"
    if written and other_written:
        return f"{what_it_is}: one output would replace the other. Give each its own {kind}."
    if written or other_written:
        read = other_what if written else what
        return f"{what_it_is}: writing it would replace {read}, which this run reads. Give another {kind}."
    return f"{what_it_is}: one {kind} given as two inputs. Give each its own {kind}."
