"""Files named by a local path or by a URL (gs://, s3://, hdfs://, ram://): a URL goes through tf.io.gfile, a local
path through the standard library.

For a local file the two are the same bytes; the standard library keeps TensorFlow out of the tools that do not
otherwise need it (the built-in corpus, the vocabulary), which would pay seconds and hundreds of MB to import it.
Text is UTF-8 and read with universal newlines either way, as `open` reads it. The pretraining writers write a
file under its `hidden_incomplete_path` and rename it when it is complete.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "new", "a.txt")
>>> makedirs(os.path.dirname(path))
>>> with open_text_for_writing(path + ".incomplete") as handle:
...     _ = handle.write("one\\r\\ntwo\\n")
>>> replace(path + ".incomplete", path)
>>> with open_text_for_reading(path) as handle:
...     list(handle)
['one\\n', 'two\\n']
>>> file_size(path), is_file(path), glob_files(os.path.join(os.path.dirname(path), "*.txt")) == [path]
(9, True, True)
>>> hidden_incomplete_path("gs://bucket/out/train.tfrecord")
'gs://bucket/out/.train.tfrecord.incomplete'
"""

import glob
import io
import os
import shutil
from typing import List, Sequence, TextIO

from albert_tf.tokenization import is_url


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def glob_files(pattern: str) -> List[str]:
    """The sorted paths matching `pattern` (for a local pattern, `glob.glob`'s: hidden files are skipped)."""
    if is_url(pattern):
        return sorted(_gfile().glob(pattern))
    return sorted(glob.glob(pattern))


def is_file(path: str) -> bool:
    if is_url(path):
        return _gfile().exists(path) and not _gfile().isdir(path)
    return os.path.isfile(path)


def file_size(path: str) -> int:
    if is_url(path):
        return _gfile().stat(path).length
    return os.path.getsize(path)


def makedirs(directory: str) -> None:
    """Creates `directory` and its parents; an existing one is kept."""
    if is_url(directory):
        _gfile().makedirs(directory)
    else:
        os.makedirs(directory, exist_ok=True)


def open_text_for_reading(path: str) -> TextIO:
    """`path` open for reading text; a URL's file is read whole first, since a GFile is no `io` buffer."""
    if not is_url(path):
        return open(path, encoding="utf-8")
    if not _gfile().exists(path):
        raise FileNotFoundError(f"{path!r} does not exist.")
    with _gfile().GFile(path, "rb") as handle:
        return io.TextIOWrapper(io.BytesIO(handle.read()), encoding="utf-8")


def open_text_for_writing(path: str) -> TextIO:
    """`path` open for writing text, empty."""
    if not is_url(path):
        return open(path, "w", encoding="utf-8")
    # TensorFlow's RAM filesystem appends to a file opened again for writing; other filesystems truncate it.
    if _gfile().exists(path):
        _gfile().remove(path)
    handle = _gfile().GFile(path, "w")
    handle.write("")  # a GFile creates its file at the first write, and a text may have none
    return handle


def replace(source: str, destination: str) -> None:
    """Renames `source` to `destination`, replacing it if it exists."""
    if is_url(source) or is_url(destination):
        _gfile().rename(source, destination, overwrite=True)
    else:
        os.replace(source, destination)


def remove(path: str) -> None:
    if is_url(path):
        _gfile().remove(path)
    else:
        os.remove(path)


def copy(source: str, destination: str) -> None:
    """Copies the file `source` to `destination`, replacing it if it exists."""
    if is_url(source) or is_url(destination):
        _gfile().copy(source, destination, overwrite=True)
    else:
        shutil.copyfile(source, destination)


def hidden_incomplete_path(path: str) -> str:
    """The hidden name `path` is written under until it is complete, beside it."""
    # Hidden, so that globs over the final names never pick up a half-written file.
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.incomplete")


def write_tsv(path: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Writes `header` and `rows` as TSV to `path`, whole or not at all (a temporary name, then a rename).

    Example:
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.tsv")
    >>> write_tsv(path, ("sentence", "label"), [("A sentence.", "email")])
    >>> open(path).read()
    'sentence\\tlabel\\nA sentence.\\temail\\n'
    """
    temporary = path + ".incomplete"
    with open_text_for_writing(temporary) as handle:
        handle.write("".join("\t".join(row) + "\n" for row in [header, *rows]))
    replace(temporary, path)
