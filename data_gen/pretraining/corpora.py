"""A built-in English corpus: the docstrings of the installed Python modules, in the pretraining text format.

The demo pretrains with no download, so it needs text every Python install already has. Docstrings are read
from source files with `ast`, never by importing a module: importing arbitrary modules has side effects
(`antigravity` opens a browser, `this` prints, GUI modules need a display) and is slow.

Output format (the input format of the original create_pretraining_data.py): one document per docstring, one
sentence per line, a blank line after every document.

From docstring to sentences (deterministic, no randomness):
1. The docstring is dedented (`inspect.cleandoc`) and cut into paragraphs at blank lines.
2. In a paragraph, only the leading lines that start at column 0 are kept: after dedenting, prose starts at
   column 0 while literal blocks, doctest output and argument tables are indented. A doctest prompt line
   (`>>>` or `...`) or a reST field (`:param x:`, `:return:`) ends the paragraph, a paragraph holding a reST
   table border (`==== ====`) is dropped whole, and so are section headings with their underlines and
   every line that looks like code: fewer than 80% of its characters are letters or spaces, or it holds
   one of "->", "==", "!=", "{", "}", " : " (signatures, expressions, numpydoc parameter lines).
3. reST markup is unwrapped (":mod:`json`" -> "json", "``x``" -> "x", a trailing "::" -> ":").
4. The kept lines are joined and split into sentences after ".", "?" or "!" followed by whitespace and an
   uppercase letter, except after a few abbreviations ("e.g.", "i.e.", ...).
5. Sentences of fewer than `min_words_per_sentence` words are dropped, then documents with fewer than
   `min_sentences_per_document` sentences. Exact duplicate documents (common through inheritance, aliases
   and copied code) are kept once, at their first occurrence.

Traversal order: files sorted by path relative to their root (standard library first, then site-packages),
and in a file the module docstring followed by class and function docstrings in source order. Only
importable names are visited (a directory or file whose name is not a Python identifier, such as
`site-packages`, `lib-dynload` or `config-3.11-x86_64-linux-gnu`, is not a module), and test code is skipped
(`test/`, `tests/`, `idle_test/`, `test_*.py`, `*_test.py`, `conftest.py`).
"""

import ast
import functools
import hashlib
import logging
import os
import re
import sysconfig
import time
import warnings
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from albert_tf.tokenization import is_url
from data_gen import file_io

TEST_DIRECTORY_NAMES = frozenset({"test", "tests", "idle_test"})
MIN_PROSE_CHARACTER_FRACTION = 0.8
CODE_MARKERS = ("->", "==", "!=", "{", "}", " : ")
# A period after these does not end a sentence.
ABBREVIATIONS = frozenset({"e.g.", "i.e.", "cf.", "vs.", "viz.", "Mr.", "Mrs.", "Ms.", "Dr.", "St."})

_DOCSTRING_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_STATEMENT_LIST_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_REST_ROLE = re.compile(r":[A-Za-z][\w.+-]*(?::[A-Za-z][\w.+-]*)*:(?=`)")
_SENTENCE_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_TABLE_BORDER = re.compile(r"^[-=+|]+( +[-=+|]+)+$")
_FIELD_LIST_MARKER = re.compile(r"^:[A-Za-z][^:`]*:(\s|$)")
_HOLDOUT_HASH_RANGE = float(1 << 64)


def source_roots(include_site_packages: bool = False) -> List[str]:
    """The directories to read: the standard library, and optionally the site-packages directories.

    Example:
    >>> roots = source_roots()
    >>> len(roots)
    1
    """
    paths = sysconfig.get_paths()
    roots = [paths["stdlib"]]
    if include_site_packages:
        roots.extend([paths["purelib"], paths["platlib"]])
    return list(dict.fromkeys(os.path.realpath(root) for root in roots))


def list_module_files(root: str) -> List[str]:
    """The importable, non-test `.py` files under `root`, sorted by their path relative to `root`."""
    files = []
    for directory, subdirectories, file_names in os.walk(root):
        subdirectories[:] = [name for name in subdirectories
                             if name.isidentifier() and name not in TEST_DIRECTORY_NAMES]
        for name in file_names:
            stem, extension = os.path.splitext(name)
            if extension != ".py" or not stem.isidentifier() or _is_test_module(stem):
                continue
            files.append(os.path.join(directory, name))
    return sorted(files, key=lambda path: os.path.relpath(path, root).split(os.sep))


def _is_test_module(stem: str) -> bool:
    return stem.startswith("test_") or stem.endswith("_test") or stem == "conftest"


def iter_docstrings(source: bytes) -> Iterator[str]:
    """The cleaned docstrings of a module's source: the module's, then its classes' and functions' in order.

    Raises SyntaxError or ValueError when `source` is not parsable Python.

    Example:
    >>> list(iter_docstrings(b'"Module."\\nclass A:\\n    "Class."\\n    def f(self):\\n        "F."'))
    ['Module.', 'Class.', 'F.']
    """
    with warnings.catch_warnings():
        # Old escape sequences in other people's code are not our concern.
        warnings.simplefilter("ignore")
        tree = ast.parse(source)
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, _DOCSTRING_OWNERS):
            docstring = ast.get_docstring(node, clean=True)
            if docstring:
                yield docstring
        children = []
        for field in _STATEMENT_LIST_FIELDS:
            value = getattr(node, field, None)
            if isinstance(value, list):
                children.extend(child for child in value if isinstance(child, ast.AST))
        pending.extend(reversed(children))


def docstring_to_sentences(docstring: str, min_words_per_sentence: int = 3) -> List[str]:
    """Splits one docstring into prose sentences by the rules in the module docstring.

    Example:
    >>> docstring_to_sentences("Read a file. Return its\\nlines.\\n\\n>>> read('x')\\n['a']")
    ['Read a file.', 'Return its lines.']
    """
    sentences = []
    for paragraph in re.split(r"\n\s*\n", docstring):
        text = " ".join(_prose_lines(paragraph.split("\n")))
        text = _unwrap_rest_markup(" ".join(text.split()))
        for sentence in _split_sentences(text):
            if len(sentence.split()) >= min_words_per_sentence:
                sentences.append(sentence)
    return sentences


def _prose_lines(lines: Sequence[str]) -> List[str]:
    stripped_lines = [line.strip() for line in lines]
    if any(_TABLE_BORDER.match(line) for line in stripped_lines):
        return []
    kept = []
    for index, (line, stripped) in enumerate(zip(lines, stripped_lines)):
        if (not stripped or line[0].isspace() or stripped.startswith((">>>", "..."))
                or _FIELD_LIST_MARKER.match(stripped)):
            break
        is_heading = index + 1 < len(lines) and _is_underline(stripped_lines[index + 1])
        if is_heading or _is_underline(stripped) or _looks_like_code(stripped):
            continue
        kept.append(stripped)
    return kept


def _is_underline(line: str) -> bool:
    return bool(line) and not any(character.isalnum() for character in line)


def _looks_like_code(line: str) -> bool:
    return _prose_fraction(line) < MIN_PROSE_CHARACTER_FRACTION or any(marker in line for marker in CODE_MARKERS)


def _prose_fraction(line: str) -> float:
    return sum(character.isalpha() or character == " " for character in line) / len(line)


def _unwrap_rest_markup(text: str) -> str:
    text = _REST_ROLE.sub("", text).replace("``", "").replace("`", "")
    if text.endswith("::"):
        text = text[:-1]
    return text


def _split_sentences(text: str) -> List[str]:
    sentences = []
    for piece in _SENTENCE_BOUNDARY.split(text):
        if sentences and sentences[-1].split()[-1].lstrip("([{\"'") in ABBREVIATIONS:
            sentences[-1] = sentences[-1] + " " + piece
        else:
            sentences.append(piece)
    return [sentence for sentence in sentences if sentence]


def package_of(path: str, root: str) -> str:
    """The top-level package (or module) a file under `root` belongs to: the import name a user would type.

    Example:
    >>> package_of("/lib/python3.11/email/mime/text.py", "/lib/python3.11"), package_of("/lib/argparse.py", "/lib")
    ('email', 'argparse')
    """
    return os.path.splitext(os.path.relpath(path, root).split(os.sep)[0])[0]


@functools.lru_cache(maxsize=4096)
def _file_sentences(path: str, size: int, modified_ns: int,
                    min_words_per_sentence: int) -> Tuple[Tuple[str, ...], ...]:
    """The sentences of each docstring of the file at `path` (docstring_to_sentences), remembered for as long as
    the file keeps its size and modification time: a process that writes the corpus again (the tests, a run that
    prepares several data sets) parses each of the standard library's files once."""
    del size, modified_ns  # part of the cache key only
    with open(path, "rb") as handle:
        return tuple(tuple(docstring_to_sentences(docstring, min_words_per_sentence))
                     for docstring in iter_docstrings(handle.read()))


def iter_sourced_documents(include_site_packages: bool = False, min_words_per_sentence: int = 3,
                           min_sentences_per_document: int = 2,
                           stats: Optional[Dict[str, int]] = None) -> Iterator[Tuple[str, List[str]]]:
    """Yields each distinct docstring of the installed modules as (its top-level package, package_of; a list of
    sentences). A docstring found in several packages is kept once, with the first package in traversal order.

    Args:
        include_site_packages: also read the site-packages directories (much larger, slower, and it
            depends on what is installed).
        min_words_per_sentence: shorter sentences are dropped.
        min_sentences_per_document: documents with fewer sentences are dropped; two is the least that
            gives sentence-order prediction a pair from one document.
        stats: when given, filled with counts (files read and unparsable, docstrings seen, documents
            dropped as short or duplicate, documents/sentences/words kept).

    Example:
    >>> package, first = next(iter_sourced_documents())
    >>> len(first) >= 2, package.isidentifier()
    (True, True)
    """
    counts = stats if stats is not None else {}
    for key in ("files", "unparsable_files", "docstrings", "short_documents", "duplicate_documents",
                "documents", "sentences", "words"):
        counts[key] = 0
    seen_documents = set()
    roots = source_roots(include_site_packages)
    files = [(root, path) for root in roots for path in list_module_files(root)]
    logging.info("Reading docstrings from %d module files under %s", len(files), ", ".join(roots))
    start = time.monotonic()
    for index, (root, path) in enumerate(files):
        if index and index % 2000 == 0:
            _log_progress(index, len(files), start, counts)
        counts["files"] += 1
        try:
            status = os.stat(path)
            docstrings = _file_sentences(path, status.st_size, status.st_mtime_ns, min_words_per_sentence)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError) as error:
            counts["unparsable_files"] += 1
            logging.debug("Skipping %s: %s", path, error)
            continue
        for docstring_sentences in docstrings:
            counts["docstrings"] += 1
            sentences = list(docstring_sentences)
            if len(sentences) < min_sentences_per_document:
                counts["short_documents"] += 1
                continue
            fingerprint = hashlib.sha256("\n".join(sentences).encode("utf-8")).digest()
            if fingerprint in seen_documents:
                counts["duplicate_documents"] += 1
                continue
            seen_documents.add(fingerprint)
            counts["documents"] += 1
            counts["sentences"] += len(sentences)
            counts["words"] += sum(len(sentence.split()) for sentence in sentences)
            yield package_of(path, root), sentences
    if counts["unparsable_files"]:
        logging.warning("Skipped %d of %d files that are not parsable Python 3 source.",
                        counts["unparsable_files"], counts["files"])
    _log_progress(len(files), len(files), start, counts)


def _log_progress(done: int, total: int, start: float, counts: Dict[str, int]) -> None:
    elapsed = time.monotonic() - start
    rate = done / elapsed if elapsed > 0 else 0.0
    remaining = (total - done) / rate if rate > 0 else 0.0
    logging.info("Docstrings: %d/%d files, %d documents, %d sentences (%.0f files/s, ETA %.0f s)",
                 done, total, counts["documents"], counts["sentences"], rate, remaining)


def is_holdout_document(sentences: Sequence[str], holdout_fraction: float, seed: int = 0) -> bool:
    """Whether a document belongs to the held-out split: a hash of (seed, text) below `holdout_fraction`.

    The split depends only on the document's text and the seed, so it is the same on every run and
    machine, and a document keeps its side when other documents come or go.

    Example:
    >>> is_holdout_document(["One sentence.", "Another one."], holdout_fraction=0.0)
    False
    """
    digest = hashlib.sha256(f"{seed}\n".encode("utf-8") + "\n".join(sentences).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / _HOLDOUT_HASH_RANGE < holdout_fraction


def write_corpus(path: str, include_site_packages: bool = False, holdout_fraction: float = 0.0,
                 holdout_path: Optional[str] = None, seed: int = 0, min_words_per_sentence: int = 3,
                 min_sentences_per_document: int = 2, holdout_packages_path: Optional[str] = None) -> Dict[str, int]:
    """Writes the docstring corpus to `path` (and a held-out part to `holdout_path`) and returns counts.

    `holdout_packages_path`, given, gets a line per held-out document, in holdout_path's order: the package it
    comes from (package_of). Any path may be local or a URL (gs://, s3://, hdfs://, ram://), written through
    tf.io.gfile.

    Each file is written to a temporary name and renamed when complete, so a reader never sees half a
    corpus. The returned dict has the counts of `iter_sourced_documents` plus `train_documents`,
    `holdout_documents` and their sentence counts.

    Example:
    >>> stats = write_corpus("/tmp/docstrings.txt", holdout_fraction=0.05,
    ...                      holdout_path="/tmp/docstrings_eval.txt")
    >>> stats["holdout_documents"] > 0
    True
    """
    if not 0.0 <= holdout_fraction < 1.0:
        raise ValueError(f"holdout_fraction={holdout_fraction} is outside [0, 1).")
    if holdout_fraction > 0.0 and not holdout_path:
        raise ValueError(f"holdout_fraction={holdout_fraction} needs a holdout_path to write the held-out "
                         "documents to.")
    if holdout_path and _same_path(holdout_path, path):
        raise ValueError(f"holdout_path {holdout_path!r} is the same file as the training output {path!r}.")
    stats: Dict[str, int] = {}
    split_counts = {"train_documents": 0, "train_sentences": 0, "holdout_documents": 0, "holdout_sentences": 0}
    if holdout_packages_path and not holdout_path:
        raise ValueError(f"holdout_packages_path={holdout_packages_path!r} needs a holdout_path.")
    outputs = {"train": path}
    if holdout_path:
        outputs["holdout"] = holdout_path
    if holdout_packages_path:
        outputs["holdout_packages"] = holdout_packages_path
    handles = {split: _open_for_atomic_write(output) for split, output in outputs.items()}
    try:
        documents = iter_sourced_documents(include_site_packages, min_words_per_sentence,
                                           min_sentences_per_document, stats)
        for package, sentences in documents:
            split = "holdout" if is_holdout_document(sentences, holdout_fraction, seed) else "train"
            handles[split].write("\n".join(sentences) + "\n\n")
            if split == "holdout" and holdout_packages_path:
                handles["holdout_packages"].write(package + "\n")
            split_counts[f"{split}_documents"] += 1
            split_counts[f"{split}_sentences"] += len(sentences)
    except BaseException:
        for split, handle in handles.items():
            handle.close()
            file_io.remove(_incomplete_path(outputs[split]))
        raise
    for split, handle in handles.items():
        handle.close()
        file_io.replace(_incomplete_path(outputs[split]), outputs[split])
    stats.update(split_counts)
    logging.info("Wrote %d documents to %s%s", stats["train_documents"], path,
                 f" and {stats['holdout_documents']} to {holdout_path}" if holdout_path else "")
    return stats


def _same_path(first: str, second: str) -> bool:
    if is_url(first) or is_url(second):
        return first == second
    return os.path.abspath(first) == os.path.abspath(second)


def _incomplete_path(path: str) -> str:
    return f"{path}.incomplete"


def _open_for_atomic_write(path: str):
    directory = os.path.dirname(path) if is_url(path) else os.path.dirname(os.path.abspath(path))
    if directory:
        file_io.makedirs(directory)
    return file_io.open_text_for_writing(_incomplete_path(path))
