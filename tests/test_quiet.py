"""Quiet by default (t2t_lite/cli/tool_process.py): a datagen → train → average → decode → export chain,
each tool in a fresh process as a user runs it, prints only the tools' own lines; --verbosity or the
user's TF_CPP_MIN_LOG_LEVEL=0 brings TensorFlow's log back (a higher level never does); the filter on
stderr loses nothing, however the tool ends."""

import json
import os
import platform
import random
import re
import select
import signal
import subprocess
import sys

import pytest
from conftest import sigint_as_at_a_terminal

from t2t_lite.cli import tool_process

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,batch_size=256,max_length=32"
# What TensorFlow and absl write on their own: C++ log lines (I0000, E0000, W0000 ... file.cc:N]),
# absl's Python format (I1122 12:48:49.842705 1406... functional_saver.py:440]), TensorFlow's
# Python logger, the start-up notes about CUDA and oneDNN, and SentencePiece's C++ lines
# (normalizer.cc(51) LOG(INFO) ...) from tensorflow-text's op.
NOT_OURS = re.compile(
    r"^[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\]|^(WARNING|INFO|ERROR):tensorflow|"
    r"absl::InitializeLog|cuda|cuInit|oneDNN|cpu_feature_guard|rebuild TensorFlow|"
    r"\.cc\(\d+\) LOG\(",
    re.IGNORECASE,
)
# A translate_files problem: t2t-datagen encodes its pairs, and t2t-exporter its serving inputs,
# with tensorflow-text's SentencePiece op, whose own SentencePiece logs each model it loads.
USR_DIR = """
from t2t_lite import registry
from t2t_lite.problems.translate_files import TranslateFiles


@registry.register_problem
class QuietFiles(TranslateFiles):
    approx_vocab_size = 400
"""


def write_corpus(root):
    (root / "usr").mkdir()
    (root / "usr" / "__init__.py").write_text(USR_DIR)
    words = "the a cat dog sees runs red big small house tree river walks".split()
    rng = random.Random(1)
    tmp_dir = root / "tmp"
    tmp_dir.mkdir()
    for split, count in (("train", 300), ("dev", 20)):
        sentences = [" ".join(rng.choices(words, k=rng.randint(2, 7))) for _ in range(count)]
        (tmp_dir / f"{split}.src").write_text("\n".join(sentences) + "\n")
        (tmp_dir / f"{split}.tgt").write_text("\n".join(" ".join(reversed(s.split())) for s in sentences) + "\n")
    (root / "input.txt").write_text("the cat sees a dog\nbig red house\n")


def run_tool(tool, *flags, env=None):
    environment = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(env or {})
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "bin", tool), *flags],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )
    assert result.returncode == 0, f"{tool}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]


def common_flags(root):
    return [f"--t2t_usr_dir={root}/usr", "--problem=quiet_files", f"--data_dir={root}/data"]


@pytest.fixture(scope="module")
def trained(built_once):
    """The chain's first half, once per test run: t2t-datagen, t2t-trainer and t2t-avg-all, each in its own
    process. Returns (the directory, {tool: the lines it printed}); the decoder and the exporter, the
    chain's second half, run on its averaged checkpoint in the tests below."""

    def build(path):
        root = str(path)
        write_corpus(path)
        common = common_flags(root)
        lines = {
            "t2t-datagen": run_tool("t2t-datagen", *common, f"--tmp_dir={root}/tmp"),
            "t2t-trainer": run_tool(
                "t2t-trainer",
                *common,
                "--hparams_set=transformer_tiny",
                f"--hparams={SMALL}",
                f"--output_dir={root}/train",
                "--train_steps=4",
                "--save_checkpoints_steps=2",
                "--local_eval_frequency=4",
                "--eval_steps=1",
            ),
            "t2t-avg-all": run_tool(
                "t2t-avg-all", f"--model_dir={root}/train", f"--output_dir={root}/avg", "--n=2", "--min_steps=0"
            ),
        }
        (path / "lines.json").write_text(json.dumps(lines))

    path = built_once("quiet_chain", build)
    return path, json.loads((path / "lines.json").read_text())


def assert_only_the_tools_own_lines(lines):
    for tool, printed in lines.items():
        assert printed, tool  # each tool reports what it did
        assert [line for line in printed if NOT_OURS.search(line)] == [], tool


def test_datagen_training_and_averaging_print_only_the_tools_own_lines(trained):
    _, lines = trained
    assert_only_the_tools_own_lines(lines)
    assert any(line.startswith("step 4/4") for line in lines["t2t-trainer"])
    assert any(line.startswith("Eval at step 4") for line in lines["t2t-trainer"])
    assert any(line.startswith("Averaged 2 checkpoints") for line in lines["t2t-avg-all"])


def test_decoding_prints_only_the_tools_own_lines(trained, tmp_path):
    root, _ = trained
    printed = run_tool(
        "t2t-decoder",
        *common_flags(root),
        f"--output_dir={root}/avg",
        "--decode_hparams=beam_size=2",
        f"--decode_from_file={root}/input.txt",
        f"--decode_to_file={tmp_path}/output.txt",
    )
    assert_only_the_tools_own_lines({"t2t-decoder": printed})
    assert os.path.exists(tmp_path / "output.txt")


def test_exporting_prints_only_the_tools_own_lines(trained, tmp_path):
    root, _ = trained
    printed = run_tool(
        "t2t-exporter",
        *common_flags(root),
        f"--output_dir={root}/avg",
        f"--export_dir={tmp_path}/export",
        "--decode_hparams=beam_size=2",
    )
    assert_only_the_tools_own_lines({"t2t-exporter": printed})
    assert os.listdir(tmp_path / "export")


# A tool in miniature (its process prepared as the entry points prepare a tool's): it writes, to file descriptor 2
# as C++ does and through sys.stderr as Python does, lines to keep and lines to drop, a SentencePiece
# line in pieces as std::cerr writes it, far more than the pipe holds, and ends as argv[1] says.
FAKE_TOOL = """
import atexit
import os
import sys
import time

from absl import app

from t2t_lite.cli import tool_process

tool_process.prepare()


def main(argv):
    os.write(2, b"I0000 00:00:1795351719.218342    5388 port.cc:153] oneDNN custom operations are on.\\n")
    print("ours: starting", file=sys.stderr, flush=True)
    for piece in (b"normalizer.cc", b"(", b"51", b") ", b"LOG(", b"INFO", b") ", b"precompiled_charsmap is empty.\\n"):
        os.write(2, piece)
    os.write(2, b"W0000 00:00:1795351719.218342    5388 some_op.cc:7] a warning of TensorFlow's\\n")
    os.write(2, b"".join(b"ours: line %d\\n" % k for k in range(20000)))
    if argv[1] == "progress":  # a progress bar redrawn on one line, then a wait
        for percent in range(1, 101):
            os.write(2, b"\\r %d%%" % percent)
            time.sleep(0.02)
        sys.stdin.read(1)
    print("ours: last line", file=sys.stderr)
    if argv[1] == "raise":
        raise RuntimeError("boom")
    if argv[1] == "os._exit":
        sys.stderr.flush()
        os._exit(0)
    if argv[1] == "exit_at_once":  # the interpreter's teardown is skipped: no atexit handler of the tool runs
        atexit.register(print, "teardown ran", file=sys.stderr)
        tool_process.exit_at_once(3)


app.run(main)
"""
KEPT = ["ours: starting", "W0000 00:00:1795351719.218342    5388 some_op.cc:7] a warning of TensorFlow's"] + [
    f"ours: line {k}" for k in range(20000)
]


def fake_tool(tmp_path):
    path = tmp_path / "t2t-fake"
    path.write_text(FAKE_TOOL)
    environment = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    return [sys.executable, str(path)], environment


@pytest.mark.parametrize("ending, returncode", [("return", 0), ("raise", 1), ("os._exit", 0), ("exit_at_once", 3)])
def test_the_filter_loses_nothing_however_the_tool_ends(tmp_path, ending, returncode):
    command, environment = fake_tool(tmp_path)
    result = subprocess.run([*command, ending], capture_output=True, text=True, env=environment, timeout=120)
    assert result.returncode == returncode and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[: len(KEPT) + 1] == KEPT + ["ours: last line"]
    if ending == "raise":
        assert lines[len(KEPT) + 1].startswith("Traceback") and lines[-1] == "RuntimeError: boom"
    else:
        assert len(lines) == len(KEPT) + 1


def test_an_unfinished_line_shows_and_ctrl_c_leaves_the_filter_running(tmp_path):
    command, environment = fake_tool(tmp_path)
    process = subprocess.Popen(
        [*command, "progress"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        start_new_session=True,
        preexec_fn=sigint_as_at_a_terminal,
    )
    seen, progress = b"", b""
    while not seen.endswith(b"\r 100%"):
        assert select.select([process.stderr], [], [], 60)[0], seen[-200:]
        seen += os.read(process.stderr.fileno(), 1 << 16)
        shown = seen.split(b"\n")[-1]
        if shown.startswith(b"\r"):
            progress = progress or shown  # the bar as it first showed
    assert not progress.endswith(b"\r 100%")  # shown while it was being redrawn, not only at the end
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the tool and its filter
    seen += process.stderr.read()
    assert process.wait(timeout=60) != 0 and seen.endswith(b"KeyboardInterrupt\n"), seen[-500:]


@pytest.fixture(scope="module")
def quiet_registry_help():
    """What t2t-avg-all --registry_help prints when nobody asks for TensorFlow's log (one run for both cases)."""
    return run_tool("t2t-avg-all", "--registry_help")


@pytest.mark.parametrize("asked", [["--verbosity=0"], {"TF_CPP_MIN_LOG_LEVEL": "0"}])
def test_the_user_can_ask_for_tensorflows_log(asked, quiet_registry_help):
    flags, env = (asked, None) if isinstance(asked, list) else ([], asked)
    quiet = quiet_registry_help
    printed = run_tool("t2t-avg-all", "--registry_help", *flags, env=env)
    assert not any(NOT_OURS.search(line) for line in quiet), quiet
    # TensorFlow's start-up lines as it writes them (oneDNN's note on x86-64, where a tool turns oneDNN on).
    assert any(NOT_OURS.search(line) for line in printed), printed


def test_asking_tensorflow_for_fewer_lines_never_brings_more():
    """TF_CPP_MIN_LOG_LEVEL=3, what a user sets to silence TensorFlow: Abseil's start-up INFO lines, which ignore
    it, stay filtered out."""
    printed = run_tool("t2t-avg-all", "--registry_help", env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert not any(NOT_OURS.search(line) for line in printed), printed
    assert any("translate_ende_gettext" in line for line in printed)


# Whether TensorFlow runs its oneDNN kernels, and the variable that decides it, in a process prepared as a tool's
# (the probe's name starts with t2t-) or one that only imports the tools' package.
ONEDNN_PROBE = """
import os
import sys
from t2t_lite.cli import entry_points, tool_process
if os.path.basename(sys.argv[0]).startswith("t2t-"):
    tool_process.prepare()
from tensorflow.python.util import _pywrap_util_port
print(_pywrap_util_port.IsMklEnabled(), os.environ.get("TF_ENABLE_ONEDNN_OPTS"))
"""


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="oneDNN's switch is x86-64's")
@pytest.mark.parametrize(
    "name, users_choice, expected",
    [
        (
            "t2t-probe",
            None,
            "True 1",
        ),  # a tool: on, whatever this CPU is (TensorFlow alone: only with VNNI, BF16 or AMX)
        ("t2t-probe", "0", "False 0"),  # the user's choice wins
        ("probe", None, "None"),  # not a tool (a notebook, a test): TensorFlow's own default, untouched
    ],
)
def test_a_tool_runs_onednn_kernels_unless_the_user_chose(tmp_path, name, users_choice, expected):
    """AVX2 CPUs otherwise get Eigen's kernels: a decoding step's vocabulary projection 5x slower (AMD Zen 3)."""
    path = tmp_path / name
    path.write_text(ONEDNN_PROBE)
    environment = {key: value for key, value in os.environ.items() if key != "TF_ENABLE_ONEDNN_OPTS"}
    if users_choice is not None:
        environment["TF_ENABLE_ONEDNN_OPTS"] = users_choice
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=environment, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    printed = result.stdout.split()
    assert (printed[1] if expected == "None" else " ".join(printed)) == expected, result.stdout


MATPLOTLIB_PROBE = """
import sys
from t2t_lite.cli import tool_process
tool_process.prepare()
import keras
from t2t_lite.data import vocabulary
print("matplotlib" in sys.modules)  # Keras' visualization helpers asked for it
print("tensorflow_text" in sys.modules)  # loaded by the first SentencePiece tokenizer, not by the module
from t2t_lite.insights import attention_plot
print(attention_plot._pyplot().__name__, keras.src.visualization.plot_image_gallery.plt)
"""


def test_a_tool_loads_matplotlib_only_to_draw(tmp_path):
    """Keras imports matplotlib for its image galleries as it loads; a tool refuses it that import (nearly a second
    of every start) and still draws; anywhere else (this test's process) Keras imports as it always does.
    tensorflow-text (half a second more) waits for a SentencePiece vocabulary's first tokenizer."""
    pytest.importorskip("matplotlib", reason="matplotlib, the optional [plot] extra, is not installed")
    path = tmp_path / "t2t-probe"
    path.write_text(MATPLOTLIB_PROBE)
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "False", "matplotlib.pyplot", "None"]
    import keras

    assert keras.src.visualization.plot_image_gallery.plt is not None  # not a tool: Keras' pyplot, untouched
    assert not any(type(finder) is tool_process._NoMatplotlibForKerasVisualization for finder in sys.meta_path)


def test_only_the_documented_lines_are_dropped():
    info = "I0000 00:00:1795351719.218342    5388 port.cc:153] oneDNN custom operations are on.\n"
    cuinit = (
        "E0000 00:00:1795351723.442451    5388 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA "
        "error: Failed call to cuInit: UNKNOWN ERROR (303)\n"
    )
    banner = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    other_error = "E0000 00:00:1795351723.442451    5388 some_kernel.cc:12] Out of memory\n"
    assert tool_process._dropped(info, no_driver=False) and tool_process._dropped(banner, no_driver=False)
    assert tool_process._dropped(cuinit, no_driver=True)
    assert tool_process._dropped(
        "normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use identity normalization.\n", no_driver=False
    )
    assert tool_process._dropped(
        "W0000 00:00:1795821073.677404   28586 root_dataset.cc:364] Optimization loop failed: CANCELLED: "
        "Operation was cancelled\n",
        no_driver=False,
    )
    assert not tool_process._dropped(
        "W0000 00:00:1795821073.677404   28586 root_dataset.cc:364] Optimization loop failed: INTERNAL: x\n",
        no_driver=False,
    )
    int8_fallback = (
        "E0000 00:00:1795857125.113622   31184 util.cc:131] oneDNN supports DT_INT8 only on platforms with "
        "AVX-512. Falling back to the default Eigen-based implementation if present.\n"
    )
    assert tool_process._dropped(int8_fallback, no_driver=False)
    assert not tool_process._dropped(int8_fallback.replace("Falling back", "Failing; no fallback"), no_driver=False)
    assert not tool_process._dropped("trainer_interface.cc(580) LOG(ERROR) something went wrong\n", no_driver=True)
    assert not tool_process._dropped(cuinit, no_driver=False)  # with a driver installed, cuInit failing is news
    assert not tool_process._dropped(other_error, no_driver=True)
    assert not tool_process._dropped("t2t-trainer: --output_dir: ... is in use by ...\n", no_driver=True)
