"""Tests for data_gen/pretraining/corpora.py and run_scripts/extract_corpus.py (the built-in docstring corpus)."""
import os
import sys

import pytest
import tensorflow as tf

from data_gen.pretraining import corpora
from tests.helpers import run_script

HOLDOUT_FRACTION = 0.05


def _read_documents(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert text.endswith("\n\n") and not text.endswith("\n\n\n")
    return [block.split("\n") for block in text[:-2].split("\n\n")]


@pytest.fixture(scope="module")
def stdlib_corpus(tmp_path_factory):
    """The standard-library corpus written once through the library, with a held-out part and its packages."""
    directory = tmp_path_factory.mktemp("corpus")
    train, holdout = str(directory / "train.txt"), str(directory / "holdout.txt")
    packages = str(directory / "holdout_packages.txt")
    modules_before = set(sys.modules)
    stats = corpora.write_corpus(train, holdout_fraction=HOLDOUT_FRACTION, holdout_path=holdout, seed=0,
                                 holdout_packages_path=packages)
    new_modules = set(sys.modules) - modules_before
    return {"train": train, "holdout": holdout, "packages": packages, "stats": stats, "new_modules": new_modules,
            "directory": directory}


def test_the_corpus_has_the_pretraining_text_format(stdlib_corpus):
    for split in ("train", "holdout"):
        for document in _read_documents(stdlib_corpus[split]):
            assert len(document) >= 2
            for sentence in document:
                assert sentence == sentence.strip() and len(sentence.split()) >= 3
                assert not sentence.startswith((">>>", "...")), sentence
                assert "\t" not in sentence and "``" not in sentence


def test_the_standard_library_gives_thousands_of_documents_and_the_counts_match_the_files(stdlib_corpus):
    stats = stdlib_corpus["stats"]
    train = _read_documents(stdlib_corpus["train"])
    holdout = _read_documents(stdlib_corpus["holdout"])
    assert stats["train_documents"] == len(train) and stats["holdout_documents"] == len(holdout)
    assert stats["documents"] == len(train) + len(holdout) >= 3000
    assert stats["sentences"] == sum(map(len, train + holdout)) >= 10000
    assert stats["words"] == sum(len(s.split()) for document in train + holdout for s in document) >= 100000
    assert stats["files"] >= 500 and stats["duplicate_documents"] > 0
    assert stats["docstrings"] == stats["documents"] + stats["short_documents"] + stats["duplicate_documents"]


def test_documents_are_unique_and_the_holdout_split_is_disjoint_and_hash_chosen(stdlib_corpus):
    train = [tuple(d) for d in _read_documents(stdlib_corpus["train"])]
    holdout = [tuple(d) for d in _read_documents(stdlib_corpus["holdout"])]
    assert len(set(train + holdout)) == len(train) + len(holdout)
    assert 0.03 < len(holdout) / (len(train) + len(holdout)) < 0.07
    assert all(corpora.is_holdout_document(d, HOLDOUT_FRACTION, seed=0) for d in holdout)
    assert not any(corpora.is_holdout_document(d, HOLDOUT_FRACTION, seed=0) for d in train)
    reseeded = {d for d in train + holdout if corpora.is_holdout_document(d, HOLDOUT_FRACTION, seed=1)}
    assert reseeded and reseeded != set(holdout)


def test_each_held_out_document_names_the_standard_library_module_it_comes_from(stdlib_corpus):
    with open(stdlib_corpus["packages"], encoding="utf-8") as handle:
        packages = handle.read().splitlines()
    assert len(packages) == len(_read_documents(stdlib_corpus["holdout"]))
    root = corpora.source_roots()[0]
    assert all(os.path.isdir(os.path.join(root, name)) or os.path.isfile(os.path.join(root, name + ".py"))
               for name in packages)
    assert len(set(packages)) > 20
    # The packages only label documents: the script's run without them writes the same text (the test below).


def test_extraction_imports_none_of_the_modules_it_reads(stdlib_corpus):
    assert not {"antigravity", "this", "tkinter", "turtle", "idlelib"} & stdlib_corpus["new_modules"]
    assert not [name for name in os.listdir(stdlib_corpus["directory"]) if name.endswith(".incomplete")]


@pytest.mark.slow
def test_the_script_writes_the_same_files_on_a_second_run(stdlib_corpus):
    directory = stdlib_corpus["directory"]
    train, holdout = str(directory / "again.txt"), str(directory / "again_holdout.txt")
    completed = run_script("extract_corpus", f"--output={train}", f"--holdout_output={holdout}",
                           f"--holdout_fraction={HOLDOUT_FRACTION}", f"--small_task_dir={directory / 'task'}",
                           timeout=None)
    assert completed.returncode == 0, completed.stderr[-3000:]
    for first, second in ((stdlib_corpus["train"], train), (stdlib_corpus["holdout"], holdout)):
        with open(first, "rb") as a, open(second, "rb") as b:
            assert a.read() == b.read()
    # The built-in small task beside it: a header and 200 training sentences of two packages.
    rows = (directory / "task" / "train.tsv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "sentence\tlabel" and len(rows) == 201 and len({row.split("\t")[1] for row in rows[1:]}) == 2


@pytest.mark.slow
def test_the_script_refuses_a_holdout_fraction_without_a_holdout_output(tmp_path):
    result = run_script("extract_corpus", f"--output={tmp_path}/x.txt", "--holdout_fraction=0.1", timeout=None)
    assert result.returncode != 0 and "--holdout_output" in result.stderr
    assert not os.path.exists(tmp_path / "x.txt")


def test_bad_holdout_arguments_are_named(tmp_path):
    path = str(tmp_path / "corpus.txt")
    with pytest.raises(ValueError, match="holdout_fraction=1.5"):
        corpora.write_corpus(path, holdout_fraction=1.5, holdout_path=str(tmp_path / "h.txt"))
    with pytest.raises(ValueError, match="holdout_fraction=0.1 needs a holdout_path"):
        corpora.write_corpus(path, holdout_fraction=0.1)
    with pytest.raises(ValueError, match="same file"):
        corpora.write_corpus(path, holdout_fraction=0.1, holdout_path=path)
    with pytest.raises(ValueError, match="holdout_packages_path='p.txt' needs a holdout_path"):
        corpora.write_corpus(path, holdout_packages_path="p.txt")


def test_sentences_keep_prose_and_drop_code_doctests_tables_and_fields():
    docstring = "\n".join([
        "Read a config file, e.g. Setup.cfg. Return its sections",
        "as a dict! Is that all? Yes it is.",
        "",
        "Example::",
        "",
        "    read(path) -> dict",
        "",
        "The :func:`read` call uses ``open`` and follows `links` too.",
        ">>> read('a.cfg')",
        "{'a': 1}",
        "",
        "Parameters",
        "----------",
        "path : str",
        "    The file to read.",
        "",
        "=====  ========",
        "Mode   Meaning",
        "=====  ========",
        "",
        ":param path: the file",
        ":return: the sections",
        "",
        "Short one.",
    ])
    assert corpora.docstring_to_sentences(docstring) == [
        "Read a config file, e.g. Setup.cfg.",
        "Return its sections as a dict!",
        "Is that all?",
        "Yes it is.",
        "The read call uses open and follows links too.",
    ]
    assert corpora.docstring_to_sentences("Short one. Two words.", min_words_per_sentence=2) == [
        "Short one.", "Two words."]


def test_docstrings_come_in_source_order_from_every_nesting():
    source = b'\n'.join([
        b'"""Module."""',
        b'import sys',
        b'class Outer:',
        b'    """Outer."""',
        b'    def method(self):',
        b'        """Method."""',
        b'        def inner():',
        b'            """Inner."""',
        b'if sys.platform:',
        b'    async def platform_function():',
        b'        """Platform."""',
        b'else:',
        b'    def fallback():',
        b'        """Fallback."""',
        b'try:',
        b'    pass',
        b'except ImportError:',
        b'    class Missing:',
        b'        """Missing."""',
        b'def last():',
        b'    "Last."',
    ])
    assert list(corpora.iter_docstrings(source)) == [
        "Module.", "Outer.", "Method.", "Inner.", "Platform.", "Fallback.", "Missing.", "Last."]
    with pytest.raises(SyntaxError):
        list(corpora.iter_docstrings(b"print 'python 2'"))


def test_module_files_skip_tests_and_names_that_are_not_modules(tmp_path):
    for relative in ["b.py", "a.py", "pkg/__init__.py", "pkg/z.py", "pkg/tests/t.py", "test/x.py",
                     "idlelib/idle_test/y.py", "idlelib/editor.py", "site-packages/lib.py", "test_a.py",
                     "a_test.py", "conftest.py", "config-3.11/python-config.py", "notes.txt"]:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('"""Doc."""\n')
    found = [os.path.relpath(path, tmp_path) for path in corpora.list_module_files(str(tmp_path))]
    assert found == ["a.py", "b.py", "idlelib/editor.py", "pkg/__init__.py", "pkg/z.py"]


def test_site_packages_are_read_only_when_asked():
    import sysconfig
    stdlib_only = corpora.source_roots()
    with_site_packages = corpora.source_roots(include_site_packages=True)
    assert stdlib_only == [os.path.realpath(sysconfig.get_paths()["stdlib"])]
    assert os.path.realpath(sysconfig.get_paths()["purelib"]) in with_site_packages


def _tiny_module_root(directory):
    """A source root of one module whose twelve functions' docstrings are twelve documents."""
    functions = "".join(f'def f{index}():\n    """Function {index} reads a file. It returns {index} lines of '
                        f'text."""\n' for index in range(12))
    (directory / "tiny.py").write_text(f'"""The tiny module has prose. It has two sentences."""\n{functions}')
    return str(directory)


def _gfile_bytes(path):
    with tf.io.gfile.GFile(path, "rb") as handle:
        return handle.read()


def test_the_corpus_writes_to_a_ram_url_the_bytes_of_a_local_file(tmp_path, monkeypatch, ram_root):
    root = _tiny_module_root(tmp_path)
    monkeypatch.setattr(corpora, "source_roots", lambda include_site_packages=False: [root])
    local = corpora.write_corpus(str(tmp_path / "train.txt"), holdout_fraction=0.3,
                                 holdout_path=str(tmp_path / "holdout.txt"))
    remote = corpora.write_corpus(f"{ram_root}/corpus/train.txt", holdout_fraction=0.3,
                                  holdout_path=f"{ram_root}/corpus/holdout.txt")
    assert remote == local and local["train_documents"] and local["holdout_documents"]
    for name in ("train.txt", "holdout.txt"):
        assert _gfile_bytes(f"{ram_root}/corpus/{name}") == (tmp_path / name).read_bytes()
    assert sorted(tf.io.gfile.listdir(f"{ram_root}/corpus")) == ["holdout.txt", "train.txt"]
    # No document held out: the held-out file is still written, empty.
    corpora.write_corpus(f"{ram_root}/corpus/train.txt", holdout_path=f"{ram_root}/corpus/holdout.txt")
    assert _gfile_bytes(f"{ram_root}/corpus/holdout.txt") == b""


def test_a_failed_ram_write_leaves_no_file(tmp_path, monkeypatch, ram_root):
    def failing_documents(*args):
        yield "a_package", ["A first sentence here.", "A second sentence here."]
        raise KeyboardInterrupt

    monkeypatch.setattr(corpora, "iter_sourced_documents", failing_documents)
    with pytest.raises(KeyboardInterrupt):
        corpora.write_corpus(f"{ram_root}/corpus/train.txt")
    assert tf.io.gfile.listdir(f"{ram_root}/corpus") == []


def test_a_second_pass_reads_again_only_the_files_that_changed(tmp_path, monkeypatch):
    root = _tiny_module_root(tmp_path)
    monkeypatch.setattr(corpora, "source_roots", lambda include_site_packages=False: [root])
    module = tmp_path / "tiny.py"
    first = corpora.write_corpus(str(tmp_path / "first.txt"))
    parses = []
    with monkeypatch.context() as parsing:
        parsing.setattr(corpora, "iter_docstrings", lambda source: parses.append(source) or iter([]))
        assert corpora.write_corpus(str(tmp_path / "again.txt")) == first and not parses
    assert (tmp_path / "again.txt").read_bytes() == (tmp_path / "first.txt").read_bytes()

    # The same size, a later modification time: read again.
    module.write_text(module.read_text().replace("tiny module", "tidy module"))
    os.utime(module, ns=(module.stat().st_atime_ns, module.stat().st_mtime_ns + 10**9))
    corpora.write_corpus(str(tmp_path / "edited.txt"))
    assert _read_documents(str(tmp_path / "edited.txt"))[0] == ["The tidy module has prose.", "It has two sentences."]
