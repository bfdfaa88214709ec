"""What TensorFlow's kernels read, told to the cache's recorder: `tf.io.read_file`, a TFRecord
or text dataset, a checkpoint's restore, a vocabulary file open files in C++, with no audit
event and no Python door.

An op callback sees each such op as it runs eagerly, with its file names: a file the recorder's
folder watch sees is left to it, `ReadFile`'s file is recorded, and any other read (an op built
into a graph, whose files are known only when it runs) makes the trace uncacheable.
"""

from __future__ import annotations

from typing import Any

from gradcheck_cli.cache.file_reads import Recorder

# Op types that open files, and the input that names them (None: not one plain file name).
FILE_READING_OPS: dict[str, int | None] = {
    "ReadFile": 0,
    "MatchingFiles": 0,
    "MatchingFilesDataset": 0,
    "ExperimentalMatchingFilesDataset": 0,
    "TFRecordDataset": 0,
    "TFRecordDatasetV2": 0,
    "TextLineDataset": 0,
    "FixedLengthRecordDataset": 0,
    "FixedLengthRecordDatasetV2": 0,
    "CSVDataset": 0,
    "CSVDatasetV2": 0,
    "ExperimentalCSVDataset": 0,
    "LMDBDataset": 0,
    "ExperimentalLMDBDataset": 0,
    "RestoreV2": 0,
    "Restore": 0,
    "RestoreSlice": 0,
    "DTensorRestoreV2": 0,
    "LoadAndRemapMatrix": 0,
    "InitializeTableFromTextFile": 1,
    "InitializeTableFromTextFileV2": 1,
    "LoadDataset": 0,
    "SnapshotDataset": 1,
    "SnapshotDatasetV2": 1,
    "CacheDataset": 1,
    "CacheDatasetV2": 1,
    "GenerateVocabRemapping": None,
    "SqlDataset": None,
    "ExperimentalSqlDataset": None,
    "ReaderRead": None,
    "ReaderReadV2": None,
    "ReaderReadUpTo": None,
    "ReaderReadUpToV2": None,
}


# Eager ops name their type in bytes, graph ops in str.
_WATCHED = frozenset(FILE_READING_OPS) | {name.encode() for name in FILE_READING_OPS}


def watch_kernel_reads(recorder: Recorder) -> None:
    """Tell `recorder` what TensorFlow's kernels read in this thread from now on."""
    from tensorflow.python.framework import op_callbacks

    def callback(
        op_type: str, inputs: Any, attrs: Any, outputs: Any, op_name: Any = None, graph: Any = None
    ) -> None:
        if op_type in _WATCHED:  # called for every op: decode only the few it watches
            name = op_type.decode() if isinstance(op_type, bytes) else op_type
            _told(recorder, name, inputs, graph)

    op_callbacks.add_op_callback(callback)


def _told(recorder: Recorder, op_type: str, inputs: Any, graph: Any) -> None:
    index = FILE_READING_OPS[op_type]
    if graph is not None or index is None or index >= len(inputs):
        recorder.unseeable = True  # built into a graph: its files are known when it runs
        return
    import glob

    import numpy

    try:
        names = [name.decode() for name in numpy.ravel(inputs[index].numpy())]
    except (AttributeError, UnicodeDecodeError, ValueError):
        recorder.unseeable = True
        return
    for name in filter(None, names):  # "": no file (CacheDataset in memory)
        if "://" in name:
            recorder.unseeable = True
        elif recorder.sees(name) and not glob.has_magic(name.rpartition("/")[0]):
            continue  # the folder watch sees the open, whatever the kernel opens there
        elif op_type == "ReadFile":
            recorder.told_read(name)
        else:
            recorder.unseeable = True
