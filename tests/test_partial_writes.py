"""What a killed or failed write leaves is recognised by its name and removed in one line; nothing else is."""

import os
import subprocess

import tensorflow as tf

from t2t_lite.run_dir import checkpoints, partial_writes


def _gone_pid() -> int:
    ended = subprocess.Popen(["true"])
    ended.wait()
    return ended.pid


def _checkpoint(directory, step):
    tf.train.Checkpoint(v=tf.Variable([1.0, 2.0])).write(os.path.join(directory, f"ckpt-{step}"))


def test_a_run_directory_keeps_its_listed_and_whole_unlisted_checkpoints_and_loses_the_leftovers(tmp_path):
    run = str(tmp_path)
    for step in (2, 4, 6):
        _checkpoint(run, step)
    checkpoints.write_checkpoint_list(run, ["ckpt-2", "ckpt-4"])  # ckpt-6: whole, unlisted (a kill before the list)
    _checkpoint(run, 8)
    os.remove(os.path.join(run, "ckpt-8.index"))  # cut before its .index
    os.makedirs(os.path.join(run, "ckpt-10_temp"))  # TensorFlow's staging, a kill inside the write
    gone, alive = _gone_pid(), os.getpid()
    for name in (f"hparams.json.tmp-{gone}", f"problem.json.tmp-{alive}", "notes.txt"):
        open(os.path.join(run, name), "w").close()
    lines = []
    removed = partial_writes.clean_checkpoint_dir(run, "checkpoint save", lines.append)
    left = ["ckpt-10_temp", "ckpt-8.data-00000-of-00001", f"hparams.json.tmp-{gone}"]
    assert removed == [os.path.join(run, name) for name in left]
    assert lines == [f"Removed {', '.join(left)} from {run}: left unfinished by an interrupted checkpoint save."]
    assert sorted(os.listdir(run)) == [
        "checkpoint",
        "ckpt-2.data-00000-of-00001",
        "ckpt-2.index",
        "ckpt-4.data-00000-of-00001",
        "ckpt-4.index",
        "ckpt-6.data-00000-of-00001",
        "ckpt-6.index",
        "notes.txt",
        f"problem.json.tmp-{alive}",  # a live writer's
    ]
    assert partial_writes.clean_checkpoint_dir(run, "checkpoint save", lines.append) == [] and len(lines) == 1


def test_a_directory_of_the_writer_s_own_loses_a_whole_unlisted_checkpoint_too(tmp_path):
    _checkpoint(str(tmp_path), 2)
    checkpoints.write_checkpoint_list(str(tmp_path), ["ckpt-2"])
    _checkpoint(str(tmp_path), 3)
    partial_writes.clean_checkpoint_dir(str(tmp_path), "t2t-avg-all", lambda line: None, own_unlisted=True)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]


def test_an_export_directory_loses_the_staging_directories_of_exports_that_are_gone(tmp_path):
    gone, alive = _gone_pid(), os.getpid()
    for name in ("8", f".10.incomplete-{gone}", f".12.incomplete-{alive}", ".hidden"):
        os.makedirs(tmp_path / name)
    lines = []
    partial_writes.clean_export_dir(str(tmp_path), "t2t-exporter", lines.append)
    assert lines == [f"Removed .10.incomplete-{gone} from {tmp_path}: left unfinished by an interrupted t2t-exporter."]
    assert sorted(os.listdir(tmp_path)) == [".12.incomplete-" + str(alive), ".hidden", "8"]
