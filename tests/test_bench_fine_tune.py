"""bench/fine_tune.sh refuses what cannot work before any work: missing corpus files, a WORK that exists."""

import os
import subprocess

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "fine_tune.sh")


def run(tmp_path, **env):
    return subprocess.run(["bash", SCRIPT], env=dict(os.environ, **env), capture_output=True, text=True, cwd=tmp_path)


def test_missing_corpus_files_and_an_existing_work_directory_are_refused(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    result = run(tmp_path, CORPUS=str(corpus), WORK=str(tmp_path / "work"))
    assert result.returncode == 2 and f"fine_tune.sh: {corpus}/train.en is missing" in result.stderr
    for name in ("train.en", "train.de", "val.en", "val.de"):
        (corpus / name).write_text("a\n")
    (tmp_path / "work").mkdir()
    result = run(tmp_path, CORPUS=str(corpus), WORK=str(tmp_path / "work"))
    assert result.returncode == 2 and "exists; name a new WORK directory" in result.stderr
    assert os.listdir(tmp_path / "work") == []
    result = run(tmp_path, WORK=str(tmp_path / "other"))
    assert result.returncode != 0 and "set CORPUS" in result.stderr
