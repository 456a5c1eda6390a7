"""The t2t-* commands: each prepares the tool's process, then imports its tool's module and runs it.

`tool_process.prepare()` must come before TensorFlow is imported (see its docstring), and every
tool's module imports TensorFlow or the library that does, so a command imports its module only
here, after the process is prepared. bin/t2t-* and the installed console scripts call these.
"""

import importlib

from t2t_lite.cli import tool_process


def run(tool: str) -> None:
    """Runs `t2t_lite.cli.<tool>`'s `main` as the command does: prepared, under absl, a signal said in a line."""
    tool_process.prepare()
    tool_process.run_tool(importlib.import_module(f"t2t_lite.cli.{tool}").main)


def t2t_datagen():
    run("t2t_datagen")


def t2t_trainer():
    run("t2t_trainer")


def t2t_avg_all():
    run("t2t_avg_all")


def t2t_decoder():
    run("t2t_decoder")


def t2t_bleu():
    run("t2t_bleu")


def t2t_translate_all():
    run("t2t_translate_all")


def t2t_parse_eval():
    run("t2t_parse_eval")


def t2t_exporter():
    run("t2t_exporter")


def t2t_make_tf_configs():
    run("t2t_make_tf_configs")


def t2t_insights():
    run("t2t_insights")
