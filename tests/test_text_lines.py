"""One sentence per line: line i is line i of `wc -l` and `sed`, bad bytes name their file and line."""

import pytest
from absl import flags as absl_flags

from t2t_lite.cli import t2t_bleu as bleu_cli
from t2t_lite.data import text_lines
from t2t_lite.evaluate import bleu


def test_lines_end_at_newline_only(tmp_path):
    path = tmp_path / "in.txt"
    # U+2028 and U+0085 inside a sentence, a form feed, a Windows line end, no final newline.
    path.write_bytes("one\u2028two\nthree\u0085four\x0cfive\r\n\nlast".encode("utf-8"))
    assert text_lines.read_lines(str(path)) == ["one\u2028two", "three\u0085four\x0cfive", "", "last"]
    path.write_bytes(b"a\nb\n")
    assert text_lines.read_lines(str(path)) == ["a", "b"]  # the final newline ends line 2, opens no line 3
    path.write_bytes(b"")
    assert text_lines.read_lines(str(path)) == []


def test_a_byte_order_mark_opening_the_file_is_not_part_of_line_one(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfErster Satz .\n\xef\xbb\xbfzweiter\n")
    assert text_lines.read_lines(str(path)) == ["Erster Satz .", "\ufeffzweiter"]  # only the file's mark
    assert open(path, encoding="utf-8-sig").read() == text_lines.read_text(str(path))


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(ValueError, match=r"bad.txt:3: not valid UTF-8"):
        text_lines.read_lines(str(path))
    with pytest.raises(ValueError, match=r"bad.txt:3: not valid UTF-8"):
        text_lines.read_text(str(path))


def test_bleu_counts_lines_as_the_decoder_writes_them(tmp_path):
    """A U+2028 inside a translation stays one line, so the counts agree with the reference's."""
    translation, reference = tmp_path / "out.de", tmp_path / "ref.de"
    translation.write_text("Das ist\u2028ein Test .\nNoch einer .\n", encoding="utf-8")
    reference.write_text("Das ist ein Test .\nNoch einer .\n", encoding="utf-8")
    assert bleu.evaluate_files(str(translation), str(reference)).lines == 2


def test_bleu_tool_names_the_bad_line(tmp_path):
    translation, reference = tmp_path / "out.de", tmp_path / "ref.de"
    translation.write_bytes(b"gut\nschlecht \xe4\n")
    reference.write_text("gut\nschlecht\n", encoding="utf-8")
    absl_flags.FLAGS.unparse_flags()
    absl_flags.FLAGS(["t2t-bleu", f"--translation={translation}", f"--reference={reference}"])
    try:
        with pytest.raises(bleu_cli.flags.UsageError, match=r"out.de:2: not valid UTF-8"):
            bleu_cli.main([])
    finally:
        absl_flags.FLAGS.unparse_flags()
