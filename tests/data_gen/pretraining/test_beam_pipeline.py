"""data_gen.pretraining.beam_pipeline: the Beam pipeline writes the local run's bytes, resumes, reads and writes any
filesystem, and refuses bad options."""
import json
import os
import time

import pytest
import tensorflow as tf

from data_gen.pretraining import beam_pipeline
from data_gen.pretraining import create_pretraining_data as cpd
from data_gen.pretraining.blocks import plan_shards
from data_gen.pretraining.instances import InstanceOptions, SpecialIds
from tests import forked_scripts
from tests.helpers import REPO_ROOT, run_script, user_environment, write_corpus

# tests/conftest.py appends .venv/beam to this process's path; `make test` installs it.
pytest.importorskip("apache_beam", reason="the beam extra is not installed: run `make beam`")
from apache_beam.io.filesystem import FileMetadata, FileSystem  # noqa: E402 (after the skip)
# The Beam processes put the extra first, as a user's environment with `pip install .[beam]` would have it.
BEAM_ENVIRONMENT = {"PYTHONPATH": os.pathsep.join([os.path.join(REPO_ROOT, ".venv", "beam"), REPO_ROOT])}
# FnApiRunner: what DirectRunner falls back to, without first trying to download the Prism runner.
IN_MEMORY = "runner=FnApiRunner,direct_running_mode=in_memory"
MULTI_PROCESSING = "runner=FnApiRunner,direct_running_mode=multi_processing,direct_num_workers=2"
NUM_SHARDS = 3
JOB = dict(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=3, random_seed=11, block_bytes=2048)


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    return write_corpus(str(tmp_path_factory.mktemp("corpus") / "corpus.txt"), num_documents=80, seed=5)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, corpus_file, spm_model_file):
    outputs = cpd.output_shard_paths(str(tmp_path_factory.mktemp("local") / "train.tfrecord"), NUM_SHARDS)
    summary = cpd.create_pretraining_data(corpus_file, outputs, spm_model_file, num_workers=2, **JOB)
    return [_read(path) for path in outputs], summary


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


def _run_beam(corpus_file, spm_model_file, output_dir, options):
    result = run_script(
        "create_pretraining_data", f"--input_file={corpus_file}", f"--output_file={output_dir}/train.tfrecord",
        f"--num_output_shards={NUM_SHARDS}", f"--spm_model_file={spm_model_file}", f"--beam_pipeline_options={options}",
        *[f"--{name}={value}" for name, value in JOB.items()], timeout=300, **BEAM_ENVIRONMENT)
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = cpd.output_shard_paths(f"{output_dir}/train.tfrecord", NUM_SHARDS)
    with open(cpd.summary_path_for(outputs), encoding="utf-8") as handle:
        return outputs, json.load(handle), result


def _same_summaries(beam_summary, local_summary):
    for summary in (beam_summary, local_summary):
        assert summary["complete"]
    assert beam_summary["totals"] == local_summary["totals"]
    assert beam_summary["settings"] | {"output_files": None} == local_summary["settings"] | {"output_files": None}
    for beam_shard, local_shard in zip(beam_summary["shards"], local_summary["shards"]):
        assert beam_shard | {"path": None} == local_shard | {"path": None}


@pytest.mark.slow
@pytest.mark.parametrize("options", [IN_MEMORY, MULTI_PROCESSING], ids=["in_memory", "multi_processing"])
def test_beam_writes_the_local_runs_bytes(tmp_path, corpus_file, spm_model_file, local_run, options):
    local_shards, local_summary = local_run
    assert local_summary["totals"]["blocks"] > NUM_SHARDS  # several blocks per shard, so the order matters
    outputs, summary, _ = _run_beam(corpus_file, spm_model_file, str(tmp_path), options)
    assert [_read(path) for path in outputs] == local_shards
    _same_summaries(summary, local_summary)
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(path) for path in outputs) + [
        "train.tfrecord.summary.json"]  # no fragments, temporary files or work directories left


@pytest.mark.slow
def test_rerun_rebuilds_only_the_deleted_shard(tmp_path, corpus_file, spm_model_file, local_run):
    local_shards, local_summary = local_run
    outputs, _, _ = _run_beam(corpus_file, spm_model_file, str(tmp_path), IN_MEMORY)
    kept = {path: os.stat(path).st_mtime_ns for path in outputs if path != outputs[1]}
    os.remove(outputs[1])
    _, summary, result = _run_beam(corpus_file, spm_model_file, str(tmp_path), IN_MEMORY)
    assert "Keeping 2 finished shard(s)" in result.stderr
    assert "1 pending shard(s)" in result.stderr
    assert {path: os.stat(path).st_mtime_ns for path in kept} == kept
    assert [_read(path) for path in outputs] == local_shards
    _same_summaries(summary, local_summary)


def test_retried_fragments_and_assembly_keep_the_bytes(tmp_path, corpus_file, spm_model_file, local_run):
    """Elements run twice and in any order (as retries and other bundlings do) give the same shards."""
    local_shards, _ = local_run
    tokenizer = cpd._job_tokenizer(spm_model_file, None)
    options = InstanceOptions(max_seq_length=JOB["max_seq_length"], dupe_factor=JOB["dupe_factor"],
                              max_predictions_per_seq=JOB["max_predictions_per_seq"])
    outputs = cpd.output_shard_paths(str(tmp_path / "train.tfrecord"), NUM_SHARDS)
    shard_blocks = plan_shards([corpus_file], "text", JOB["block_bytes"], outputs)
    fragment_directory = str(tmp_path / "fragments")
    os.makedirs(fragment_directory)
    job = beam_pipeline.BeamJob(spm_model_file, None, True, tokenizer.digit_comma_rule, "text", "text", options,
                                SpecialIds(tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id,
                                           tokenizer.vocab_size), JOB["random_seed"], fragment_directory,
                                tuple(outputs))
    blocks = [block for assigned in shard_blocks for block in assigned]
    first = [item for block in reversed(blocks) for item in beam_pipeline._FragmentWriter(job)(block)]
    os.remove(job.fragment_path(blocks[0].index, 1))  # a fragment lost: only it is written again
    second = [item for block in blocks for item in beam_pipeline._FragmentWriter(job)(block)]
    assert sorted(first, key=repr) == sorted(second, key=repr)
    for shard in reversed(range(NUM_SHARDS)):
        fragments = [value for key, value in second if key == shard]
        for _ in range(2):
            beam_pipeline._ShardAssembler(job)((shard, ([shard_blocks[shard]], list(reversed(fragments)))))
    assert [_read(path) for path in outputs] == local_shards
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".incomplete")]


class _TensorFlowRamFileSystem(FileSystem):
    """Beam's FileSystems for ram://, over tf.io.gfile's in-memory filesystem: the launcher (tf.io.gfile) and the
    in-memory runner's workers (Beam's FileSystems) see the same files, and a local-only call (open, os.path)
    on a ram:// path fails. Defining the class registers the scheme with Beam; `opened` lists what it read."""

    opened = []

    @classmethod
    def scheme(cls):
        return "ram"

    def join(self, basepath, *paths):
        return "/".join([basepath.rstrip("/"), *paths])

    def split(self, path):
        directory, _, name = path.rpartition("/")
        return directory, name

    def mkdirs(self, path):
        tf.io.gfile.makedirs(path)

    def has_dirs(self):
        return True

    def _list(self, dir_or_prefix):
        raise NotImplementedError("the pipeline never lists a directory")

    def create(self, path, mime_type=None, compression_type=None):
        return tf.io.gfile.GFile(path, "wb")

    def open(self, path, mime_type=None, compression_type=None):
        self.opened.append(path)
        return tf.io.gfile.GFile(path, "rb")

    def copy(self, source_file_names, destination_file_names):
        for source, destination in zip(source_file_names, destination_file_names):
            tf.io.gfile.copy(source, destination, overwrite=True)

    def rename(self, source_file_names, destination_file_names):
        for source, destination in zip(source_file_names, destination_file_names):
            tf.io.gfile.rename(source, destination, overwrite=True)

    def exists(self, path):
        return tf.io.gfile.exists(path)

    def size(self, path):
        return tf.io.gfile.stat(path).length

    def last_updated(self, path):
        return tf.io.gfile.stat(path).mtime_nsec / 1e9

    def metadata(self, path):
        return FileMetadata(path, self.size(path), self.last_updated(path))

    def delete(self, paths):
        for path in paths:
            (tf.io.gfile.rmtree if tf.io.gfile.isdir(path) else tf.io.gfile.remove)(path)


def test_beam_reads_and_writes_through_filesystems_only(corpus_file, spm_model_file, local_run):
    """Input, vocabulary, fragments and shards on ram://, which only tf.io.gfile and Beam's FileSystems open."""
    local_shards, local_summary = local_run
    root = f"ram://beam_paths_{os.getpid()}_{time.time_ns()}"
    tf.io.gfile.makedirs(f"{root}/corpus")
    tf.io.gfile.copy(corpus_file, f"{root}/corpus/part-0.txt")
    tf.io.gfile.copy(spm_model_file, f"{root}/spm.model")
    outputs = cpd.output_shard_paths(f"{root}/out/train.tfrecord", NUM_SHARDS)
    try:
        summary = cpd.create_pretraining_data(f"{root}/corpus/*.txt", outputs, f"{root}/spm.model",
                                              beam_pipeline_options=IN_MEMORY, **JOB)
        assert [_gfile_read(path) for path in outputs] == local_shards
        # The workers read the input and the vocabulary through Beam's FileSystems, not tf.io.gfile.
        assert {f"{root}/corpus/part-0.txt", f"{root}/spm.model"} <= set(_TensorFlowRamFileSystem.opened)
        settings, local_settings = summary["settings"], local_summary["settings"]
        assert settings["tokenizer"]["sha256"] == local_settings["tokenizer"]["sha256"]
        assert settings["input_files"] == [[f"{root}/corpus/part-0.txt", os.path.getsize(corpus_file)]]
        _same_summaries(summary, local_summary | {"settings": local_settings | {
            "input_files": settings["input_files"], "tokenizer": settings["tokenizer"]}})
        assert sorted(tf.io.gfile.listdir(f"{root}/out")) == sorted(
            os.path.basename(path) for path in outputs) + ["train.tfrecord.summary.json"]
    finally:
        tf.io.gfile.rmtree(root)


def _gfile_read(path):
    with tf.io.gfile.GFile(path, "rb") as handle:
        return handle.read()


def test_num_workers_with_beam_options_is_refused(tmp_path, corpus_file, spm_model_file):
    with pytest.raises(ValueError, match=r"--num_workers=2 cannot be combined with --beam_pipeline_options"):
        cpd.create_pretraining_data(corpus_file, [str(tmp_path / "out")], spm_model_file, num_workers=2,
                                    beam_pipeline_options=IN_MEMORY)
    assert not os.listdir(tmp_path)


def _guide_dataflow_options():
    """The pretraining-data guide's Dataflow --beam_pipeline_options values, their line continuations joined."""
    with open(os.path.join(REPO_ROOT, "docs", "pretraining-data.md"), encoding="utf-8") as handle:
        text = handle.read().replace("\\\n", "")
    prefix = '--beam_pipeline_options="runner=DataflowRunner'
    return [line[len('--beam_pipeline_options="'):line.index('"', len(prefix))]
            for line in text.splitlines() if line.startswith(prefix)]


def test_the_guides_dataflow_options_are_beam_options():
    from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, SetupOptions, StandardOptions

    setup_file, extra_package = _guide_dataflow_options()
    for value in (setup_file, extra_package):
        options = PipelineOptions(beam_pipeline.pipeline_arguments(value))
        assert options.view_as(StandardOptions).runner == "DataflowRunner"
        cloud = options.view_as(GoogleCloudOptions)
        assert (cloud.project, cloud.region, cloud.temp_location) == ("MY_PROJECT", "us-central1",
                                                                        "gs://MY_BUCKET/tmp")
        # Beam keeps a misspelt option as one of its own names, unknown to every options class.
        assert set(options.get_all_options(retain_unknown_options=True)) == set(options.get_all_options())
    assert PipelineOptions(beam_pipeline.pipeline_arguments(setup_file)).view_as(
        SetupOptions).setup_file == "/path/to/albert-tf/setup.py"
    assert PipelineOptions(beam_pipeline.pipeline_arguments(extra_package)).view_as(
        SetupOptions).extra_packages == ["dist/albert_tf-0.1.0.tar.gz"]


@pytest.mark.parametrize("options, message", [
    ("runner=FnApiRunner,,direct_num_workers=2", "has an empty item"),
    ("--runner=FnApiRunner", "starts with a dash"),
])
def test_malformed_beam_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        beam_pipeline.pipeline_arguments(options)


@pytest.mark.slow
def test_script_refuses_num_workers_with_beam_options_in_one_line(tmp_path, corpus_file, spm_model_file):
    result = forked_scripts.run(["-m", "run_scripts.create_pretraining_data", f"--input_file={corpus_file}",
                                 f"--output_file={tmp_path}/train.tfrecord", f"--spm_model_file={spm_model_file}",
                                 "--num_workers=1", f"--beam_pipeline_options={IN_MEMORY}"],
                                env=user_environment(**BEAM_ENVIRONMENT), timeout=600)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: --num_workers=1 cannot be combined with --beam_pipeline_options={IN_MEMORY!r}: Beam's own "
        "num_workers means Dataflow workers, so give the runner's worker count inside the Beam options (e.g. "
        "direct_num_workers=2)."]
