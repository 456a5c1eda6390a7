"""A record of the raw files each split was generated from, so stale data is never reused.

t2t-datagen reuses a split whose shards exist. That is right only while the raw files
are those the shards (and the vocabulary, trained on the train split) were made from,
so `<data_dir>/raw_fingerprint.<problem>.json` records, per split, each raw file's
size, modification time and SHA-256:

* size and mtime unchanged: the file is taken as unchanged without reading it, so a
  rerun over a WMT-size corpus costs a few `stat` calls;
* size changed: changed;
* same size, other mtime (a `cp`, `touch` or re-download): the content decides, so
  a copy of the same text raises no false alarm and an edit that keeps the size is
  still found;
* a file that appeared or disappeared (a split's `.mrg` file added, a gettext catalog
  installed or removed with its package): changed too.

A file is named relative to --tmp_dir, or by its absolute path when it lies elsewhere
(the system's gettext catalogs). Which files a split is made from is the problem's
`raw_files`: translate_files' `.src`/`.tgt`, parsing_wsj's `.mrg` files of the split,
every catalog of the gettext problems (each split draws on all of them); and a split's files given
to datagen beside them (`extra_files`: the train split's `--train_alignments` file), so adding,
removing or editing the alignments is a change of the train split's raw data.

Hashing reads each raw file once more when a split is written, a small cost beside
tokenizing it. Problems without raw files (the synthetic algorithmic ones, or WMT,
whose downloads tfds checks itself) record nothing and are never refused.
"""

import hashlib
import json
import os

from t2t_lite.data import whole_files

_READ_BYTES = 1 << 20


class RawDataChangedError(ValueError):
    """Raw files differ from those the data in --data_dir was generated from."""


def record_path(data_dir: str, base_name: str) -> str:
    return os.path.join(data_dir, f"raw_fingerprint.{base_name}.json")


def file_fingerprint(path: str) -> dict:
    """{"size", "mtime_ns", "sha256"} of one file."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(_READ_BYTES), b""):
            digest.update(block)
    status = os.stat(path)
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns, "sha256": digest.hexdigest()}


def is_unchanged(path: str, recorded: dict) -> bool:
    """Whether `path` still holds what `recorded` describes (hashing only when size agrees and mtime does not)."""
    if not os.path.exists(path):
        return False
    status = os.stat(path)
    if status.st_size != recorded["size"]:
        return False
    if status.st_mtime_ns == recorded["mtime_ns"]:
        return True
    return file_fingerprint(path)["sha256"] == recorded["sha256"]


def file_name(path: str, tmp_dir: str) -> str:
    """How a raw file is recorded and named: relative to tmp_dir when inside it, else its absolute path."""
    path, tmp_dir = os.path.abspath(path), os.path.abspath(tmp_dir)
    return os.path.relpath(path, tmp_dir) if path.startswith(os.path.join(tmp_dir, "")) else path


def split_files(problem, tmp_dir: str, split: str, extra_files: dict = None) -> list:
    """The raw files of `split`: the problem's, then those `extra_files` ({split: [path, ...]}) adds."""
    return problem.raw_files(tmp_dir, split) + list((extra_files or {}).get(split, []))


def split_fingerprint(problem, tmp_dir: str, split: str, extra_files: dict = None) -> dict:
    """{`file_name`: fingerprint} of the raw files of `split` (`split_files`)."""
    paths = split_files(problem, tmp_dir, split, extra_files)
    return {file_name(path, tmp_dir): file_fingerprint(path) for path in paths}


def read_record(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def changed_files(recorded: dict, problem, tmp_dir: str, split: str, extra_files: dict = None) -> list:
    """Names (`file_name`) of the split's raw files that changed, appeared or disappeared."""
    current = {file_name(path, tmp_dir) for path in split_files(problem, tmp_dir, split, extra_files)}
    changed = sorted(current ^ set(recorded))
    changed += sorted(
        name for name in current & set(recorded) if not is_unchanged(os.path.join(tmp_dir, name), recorded[name])
    )
    return changed


def check_unchanged(path: str, problem, data_dir: str, tmp_dir: str, extra_files: dict = None) -> None:
    """Stops, naming the files, when a split in `data_dir` was generated from raw files that changed since."""
    record = read_record(path)
    changes = {split: changed_files(files, problem, tmp_dir, split, extra_files) for split, files in record.items()}
    changes = {split: names for split, names in changes.items() if names}
    if not changes:
        return
    splits_of = {}  # splits drawing on the same files (every gettext split) are named together
    for split, names in changes.items():
        splits_of.setdefault(tuple(names), []).append(split)
    listed = "; ".join(f"{', '.join(splits)}: {', '.join(names)}" for names, splits in splits_of.items())
    outside = all(os.path.isabs(name) for names in splits_of for name in names)  # e.g. the system's catalogs
    where = "" if outside else f" in --tmp_dir={tmp_dir}"
    raise RawDataChangedError(
        f"The raw files of {problem.base_name}{where} changed since the data in "
        f"--data_dir={data_dir} was generated from them ({listed}). Rerun t2t-datagen with --overwrite to "
        f"regenerate the vocabulary and every split from them (the old ones are deleted), restore the old raw "
        f"files, or choose another --data_dir."
    )


def digest(path: str) -> tuple:
    """(a short SHA-256 of every recorded raw file's name and content hash, the number of files), or None.

    Two machines whose digests agree generate the same data: the gettext problems read the
    system's catalogs, which differ with the packages installed, so a figure measured on one
    machine holds on another only where this digest is the same.
    """
    record = read_record(path)
    lines = sorted(
        f"{split}\t{name}\t{entry['sha256']}" for split, files in record.items() for name, entry in files.items()
    )
    if not lines:
        return None
    files = {name for files in record.values() for name in files}
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:12], len(files)


def update(path: str, problem, tmp_dir: str, before: dict, *, written: list, reused: list, extra_files=None) -> None:
    """Records the raw files of the splits just written (`before`: as they were when datagen started).

    A reused split without a record (data written before records existed) gets one of
    its current raw files, with a note.
    """
    old = read_record(path)
    record = dict(old)
    unrecorded = [split for split in reused if split not in record and problem.raw_files(tmp_dir, split)]
    for split in unrecorded:
        before[split] = split_fingerprint(problem, tmp_dir, split, extra_files)
    for split in written + unrecorded:
        if before[split]:
            record[split] = before[split]
    if unrecorded:
        print(
            f"Note: {', '.join(unrecorded)} of {problem.base_name} predate{'s' if len(unrecorded) == 1 else ''} "
            f"the record of raw files; recorded the current ones. If the raw files changed since that data was "
            f"written, rerun t2t-datagen with --overwrite."
        )
    if record == old:  # nothing new: the file (and its mtime) stays as it was
        return
    whole_files.write_whole(path, json.dumps(record, indent=1, sort_keys=True))
