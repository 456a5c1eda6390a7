"""Text files of one sentence per line, as every t2t-* tool reads them.

A line ends at "\n" only (a "\r" before it is dropped), so line i here is line i for
`wc -l`, `sed -n i p` and the decoder that wrote the file; `str.splitlines` would also
split inside a sentence at U+2028, U+0085 or a form feed, shifting every later line
against its reference. Bytes that are not UTF-8 are an error naming the file and line.
A byte-order mark that opens the file (as some editors write UTF-8) is not part of line 1:
it is left out, as Python's "utf-8-sig" codec does, so the first sentence is translated and
scored as the others.
"""


def read_lines(path: str) -> list:
    """The lines of a UTF-8 text file, without their line ends."""
    lines = read_text(path).split("\n")
    if lines[-1] == "":  # the final newline ends the last line; it opens no new one
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def read_text(path: str) -> str:
    """A whole UTF-8 text file; bad bytes are an error naming their line."""
    with open(path, "rb") as file:
        data = file.read()
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        number = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path}:{number}: not valid UTF-8 ({error.reason}).") from None
