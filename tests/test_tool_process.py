"""A tool's process: a full disk ends a tool with one line naming the file, exit 1, its partial files removed."""

import errno
import os
import sys

import full_disk
import pytest
import tensorflow as tf

from t2t_lite.cli import tool_process
from t2t_lite.decode import decode_files


def test_enospc_from_python_and_from_tensorflow_names_the_file_not_its_temporary_name(tmp_path):
    written = tmp_path / "run" / "ckpt-10"
    python = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out.txt"))
    message = tool_process.disk_full_message(python)
    assert (
        message.startswith(f"the disk holding {tmp_path} is full (")
        and f"could not write {tmp_path}/out.txt. " in message
    )
    # As TensorFlow 2.21 words it when a checkpoint's shard hits ENOSPC (seen on a full tmpfs).
    tensorflow = tf.errors.ResourceExhaustedError(
        None,
        None,
        "{{function_node __wrapped__SaveV2_dtypes_2_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
        f"{written}_temp/part-00000-of-00001.data-00000-of-00001.tempstate3056890418752432642; No space left on "
        "device [Op:SaveV2]",
    )
    message = tool_process.disk_full_message(tensorflow)
    assert message.startswith(f"the disk holding {tmp_path} is full (") and f"could not write {written}. " in message
    staged = tf.errors.ResourceExhaustedError(
        None, None, f"{tmp_path}/export/.150.incomplete-29190/variables/variables.index; No space left on device"
    )  # a SavedModel's staging directory: named as the version it becomes
    assert f"could not write {tmp_path}/export/150/variables/variables.index. " in tool_process.disk_full_message(
        staged
    )
    wrapped = RuntimeError("saving failed")
    wrapped.__cause__ = python
    assert tool_process.disk_full_message(wrapped) == tool_process.disk_full_message(python)
    assert tool_process.disk_full_message(ValueError("No such file")) is None


def test_a_decoder_output_on_a_full_disk_is_one_line_exit_1_and_no_tmp_left(small_disk, monkeypatch, capsys):
    output = str(small_disk / "out.txt")
    filler = full_disk.fill(small_disk, leave=64 * 1024)
    monkeypatch.setattr(sys, "argv", ["t2t-decoder"])

    def decode(argv):
        decode_files.write_lines(output, ["x" * 1000] * 2000)  # 2 MB where 64 kB are free

    with pytest.raises(SystemExit) as exit_info:
        tool_process.run_tool(decode)
    assert exit_info.value.code == 1
    printed = capsys.readouterr().err.splitlines()
    assert len(printed) == 1 and printed[0].startswith(f"t2t-decoder: the disk holding {small_disk} is full (")
    assert f"could not write {output}. " in printed[0]
    assert os.listdir(small_disk) == ["filler"]  # its partial output removed
    os.remove(filler)
    decode_files.write_lines(output, ["x" * 1000] * 200)  # once there is room, the same output is written
    assert open(output).read() == ("x" * 1000 + "\n") * 200


def test_a_tmp_file_a_killed_decoder_left_is_removed_with_a_line(tmp_path, capsys):
    output = tmp_path / "out.txt"
    (tmp_path / "out.txt.tmp").write_text("half a deco")
    decode_files.write_lines(str(output), ["ein", "zwei"])
    assert output.read_text() == "ein\nzwei\n" and not (tmp_path / "out.txt.tmp").exists()
    assert capsys.readouterr().err == f"Removed {output}.tmp: left unfinished by an interrupted t2t-decoder.\n"
