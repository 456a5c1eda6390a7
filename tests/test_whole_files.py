"""Whole files or none: the old file or the new one; a full disk leaves no partial file and no nameless error."""

import errno
import os

import full_disk
import pytest

from t2t_lite.data import whole_files


def test_the_new_content_replaces_the_old_whole_and_no_incomplete_file_stays(tmp_path):
    path = str(tmp_path / "record.json")
    whole_files.write_whole(path, '{"old": 1}')
    whole_files.write_whole(path, '{"new": 2}')
    whole_files.write_whole(str(tmp_path / "model"), b"\x00\x01")
    assert open(path).read() == '{"new": 2}' and open(tmp_path / "model", "rb").read() == b"\x00\x01"
    assert sorted(os.listdir(tmp_path)) == ["model", "record.json"]


def test_a_full_disk_keeps_the_old_file_and_names_the_new_one(small_disk):
    path = str(small_disk / "vocab.model")
    whole_files.write_whole(path, b"old")
    full_disk.fill(small_disk)
    with pytest.raises(OSError) as error:
        whole_files.write_whole(path, b"x" * 100_000)
    assert (error.value.errno, error.value.filename) == (errno.ENOSPC, path)
    assert open(path, "rb").read() == b"old" and sorted(os.listdir(small_disk)) == ["filler", "vocab.model"]
