"""Path flags are checked when a tool starts: a file where a directory belongs, or the reverse, a
missing path or one that cannot be written stops with the flag's name, before any work."""

import os

import pytest
from absl import flags as absl_flags

from t2t_lite.cli import flags


@pytest.fixture
def output_dir_flag():
    absl_flags.FLAGS(["test"], known_only=True)
    saved = flags.FLAGS.output_dir
    yield lambda value: setattr(flags.FLAGS, "output_dir", value)
    flags.FLAGS.output_dir = saved


def test_a_file_given_as_a_directory_is_refused(tmp_path, output_dir_flag):
    a_file = tmp_path / "model"
    a_file.write_text("not a directory")
    output_dir_flag(str(a_file))
    for check in (flags.existing_dir, flags.writable_dir):
        with pytest.raises(flags.UsageError, match=r"--output_dir=.*is a file; give a directory"):
            check("output_dir")


def test_a_directory_given_as_a_file_is_refused(tmp_path, output_dir_flag):
    output_dir_flag(str(tmp_path))
    for check in (flags.existing_file, flags.writable_file):
        with pytest.raises(flags.UsageError, match=r"--output_dir=.*is a directory"):
            check("output_dir")


def test_missing_paths_are_named(tmp_path, output_dir_flag):
    output_dir_flag(str(tmp_path / "absent"))
    with pytest.raises(flags.UsageError, match=r"--output_dir=.*absent: no such directory"):
        flags.existing_dir("output_dir")
    with pytest.raises(flags.UsageError, match=r"--output_dir=.*absent: no such file"):
        flags.existing_file("output_dir")
    output_dir_flag(str(tmp_path / "absent" / "out.txt"))
    with pytest.raises(flags.UsageError, match=r"its directory .*absent does not exist"):
        flags.writable_file("output_dir")


def test_a_directory_to_create_under_a_file_is_refused(tmp_path, output_dir_flag):
    (tmp_path / "plain").write_text("x")
    output_dir_flag(str(tmp_path / "plain" / "train"))
    with pytest.raises(flags.UsageError, match=r"plain is a file, so the directory cannot be created"):
        flags.writable_dir("output_dir")


def test_an_unwritable_directory_is_named(tmp_path, output_dir_flag, monkeypatch):
    # As root every directory is writable, so the operating system's answer is what is replaced here.
    locked = tmp_path / "locked"
    locked.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: os.path.abspath(path) != str(locked))
    output_dir_flag(str(locked / "train"))
    with pytest.raises(flags.UsageError, match=r"locked is not writable by this user"):
        flags.writable_dir("output_dir")


def test_usable_and_remote_paths_pass(tmp_path, output_dir_flag):
    output_dir_flag(str(tmp_path / "new" / "train"))
    assert flags.writable_dir("output_dir") == str(tmp_path / "new" / "train")
    output_dir_flag("gs://bucket/train")  # checked by TensorFlow's file system on first use
    assert flags.writable_dir("output_dir") == "gs://bucket/train"
