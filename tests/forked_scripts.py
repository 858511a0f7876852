"""Runs the tests' Python programs as forks of a process that has imported TensorFlow and the project already.

About a hundred tests run a script as a user would (`python -m run_scripts.<name>`), and each such process spent
3-4 CPU-seconds importing TensorFlow, Keras and the project before its first line: a quarter of the suite's CPU
time on 2 cores. A server per test worker (`python -m tests.forked_scripts`) imports them once and forks a child
per program: the child gets the program's argv, working directory, environment and standard streams, runs it as
`__main__` (`runpy`) and exits with its status, so the test sees a process of its own that it can signal, read and
wait for. The server never runs a TensorFlow op, so each child still chooses its allocator and XLA flags as a
fresh process does.

The library's own child processes (albert_tf.benchmarking.child_process.start_python: a benchmark's rows, a
report's writer) fork from the same server, whether a test or a forked program starts them: the server listens on a
socket of its own for the programs it forked, and the child is then the server's, not the program's.

What a fork cannot give falls back to a fresh interpreter (`popen`): an environment that differs from the
server's (the tests' own, `script_environment`) in a variable read while Python or TensorFlow start (PYTHONPATH
beyond the repository, TF_CPP_*, ...), a code string (`-c`, most often a check of what a fresh interpreter
imports), a program outside the repository, a peer's program (`peers.*`: it measures another framework in a
process without ours), and any program when ALBERT_TF_TEST_FRESH_PROCESSES=1.
"""

import array
import atexit
import gc
import importlib
import json
import os
import pkgutil
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback

from run_scripts import stderr_to_devnull

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRESH_PROCESSES_VARIABLE = "ALBERT_TF_TEST_FRESH_PROCESSES"
# Variables read while the interpreter, TensorFlow or oneDNN start: a child with other values needs a fresh process.
# (CUDA's are read when TensorFlow first lists its devices, which the server never does.)
_START_UP_PREFIXES = ("PYTHON", "TF_CPP", "TF_ENABLE", "LD_", "OMP_", "KMP_", "MALLOC_", "KERAS_", "TF_NUM_")
_PRELOADED_PACKAGES = ("albert_tf", "data_gen")
_HEADER = struct.Struct("!I")
# Python's defaults are (700, 10, 10): a young collection every 700 net allocations.
GARBAGE_COLLECTION_THRESHOLDS = (20000, 10, 10)
# In the server: the address it listens on for the programs it forked, its environment, and its sockets (which a
# forked program closes first).
_program_address = None
_server_environment = None
_server_sockets = set()
_fork_lock = threading.Lock()


# ---- the server -------------------------------------------------------------------------------------------------

def trace_without_remapping():
    """Turns Grappler's remapper off for the functions this process (and every process it forks) traces.

    The remapper matches kernel fusions (a MatMul with its bias and GELU, ...) in every function a process runs
    first: about three quarters of a tiny model's first training step (3.2 s against 0.9 s for two layers), a
    fifth of a test's CPU time where it trains and evaluates tiny models, for fusions that change no result at
    float32 and none beyond bfloat16's rounding (tests/training/test_graph_rewrites.py). Users' runs keep it.
    """
    import tensorflow as tf
    tf.config.optimizer.set_experimental_options({"remapping": False})


def collect_garbage_rarely():
    """Exempts every object alive now (the imported modules) from Python's cyclic garbage collector and makes its
    collections rarer, in this process and every process it forks.

    Tracing TensorFlow functions leaves many Python objects, and every full collection visited them and the
    imported modules: 5-10% of a test worker's CPU time, about half of it saved here, at the same peak memory.
    Objects outside reference cycles are freed as before; cyclic garbage waits longer for its collection.
    """
    gc.freeze()
    gc.set_threshold(*GARBAGE_COLLECTION_THRESHOLDS)


def _preload():
    """Imports TensorFlow quietly, then every module of the project's library that imports on its own."""
    with stderr_to_devnull():
        import tensorflow  # noqa: F401
        import keras  # noqa: F401
    trace_without_remapping()
    for package_name in _PRELOADED_PACKAGES:
        package = importlib.import_module(package_name)
        for module in pkgutil.walk_packages(package.__path__, package_name + "."):
            try:
                importlib.import_module(module.name)
            except ImportError:
                pass  # an optional extra (onnx, Beam): the child imports it from its own path or fails as usual
    from tensorflow.python.eager import context
    if context.context_safe() is not None and context.context()._context_handle is not None:
        raise RuntimeError("A preloaded module ran a TensorFlow op: the forked programs would share its allocator.")
    collect_garbage_rarely()


def _send(connection, lock, message, fds=()):
    data = json.dumps(message).encode()
    with lock:
        connection.sendmsg([_HEADER.pack(len(data)) + data],
                           [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else [])


def _receive(connection, max_fds=0, timeout=None):
    """One message and the file descriptors that came with it; None when the other side has closed. Raises
    TimeoutError when no message begins within `timeout` seconds (0: only one already there)."""
    connection.settimeout(timeout)
    try:
        header, ancillary, _, _ = connection.recvmsg(_HEADER.size,
                                                     socket.CMSG_SPACE(max_fds * 4) if max_fds else 0)
    except BlockingIOError:
        raise TimeoutError from None
    finally:
        connection.settimeout(None)
    if not header:
        return None, []
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    (length,) = _HEADER.unpack(header)
    body = b""
    while len(body) < length:
        chunk = connection.recv(length - len(body))
        if not chunk:
            return None, list(fds)
        body += chunk
    return json.loads(body), list(fds)


def _run_program(request, stdin, stdout, stderr):
    """In the forked child: becomes the program of `request` and never returns."""
    code = 1
    try:
        for server_socket in list(_server_sockets):
            server_socket.close()
        for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        arguments = request["arguments"]
        if arguments[0] == "-m":
            sys.argv = [arguments[1], *arguments[2:]]
            sys.path.insert(0, os.getcwd())
            # A preloaded module runs again as __main__, without runpy's warning that it was imported already.
            sys.modules.pop(arguments[1], None)
            runpy.run_module(arguments[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(arguments)
            sys.path.insert(0, os.path.dirname(os.path.abspath(arguments[0])))
            runpy.run_path(arguments[0], run_name="__main__")
        code = 0
    except SystemExit as error:
        if error.code is None or isinstance(error.code, int):
            code = error.code or 0
        else:
            print(error.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: B036 (as Python reports an uncaught exception and exits 1)
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _report_exit(connection, lock, pid, worker):
    _, status, usage = os.wait4(pid, 0)
    cpu_seconds = usage.ru_utime + usage.ru_stime
    reports = [((connection, lock), {"exited": pid, "returncode": os.waitstatus_to_exitcode(status),
                                     "cpu_seconds": cpu_seconds})]
    if worker is not None:
        # A forked program's child is not the program's: the test worker counts its CPU time.
        reports.append((worker, {"cpu_seconds": cpu_seconds}))
    for (destination, destination_lock), message in reports:
        try:
            _send(destination, destination_lock, message)
        except OSError:
            pass  # the other end has gone: a program that ended without waiting for its child, or the worker


def serve(connection, lock, worker=None):
    """Forks a child per request on `connection` until its other end closes it; `worker` (the test worker's
    connection and its lock) hears of the CPU time of each child that a forked program asked for."""
    _server_sockets.add(connection)
    while True:
        select.select([connection], [], [])
        # One request at a time from receiving its descriptors to closing them here: a child forked meanwhile for
        # another connection would keep this request's pipes open, and its reader would wait for that child.
        with _fork_lock:
            request, fds = _receive(connection, max_fds=3)
            if request is None:
                _server_sockets.discard(connection)
                return
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _run_program(request, *fds)
            for fd in fds:
                os.close(fd)
        _send(connection, lock, {"started": pid})
        threading.Thread(target=_report_exit, args=(connection, lock, pid, worker), daemon=True).start()


def _serve_forked_programs(listener, worker):
    """Serves each forked program that connects to `listener`, as the worker is served."""
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=serve, args=(connection, threading.Lock(), worker), daemon=True).start()


def _serve_forever(worker_connection):
    global _program_address, _server_environment
    _preload()
    from albert_tf.benchmarking import child_process
    worker = (worker_connection, threading.Lock())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _program_address = f"\0albert-tf-tests-{os.getpid()}"  # Linux's abstract namespace: no file to remove
    listener.bind(_program_address)
    listener.listen()
    _server_sockets.add(listener)
    _server_environment = dict(os.environ)
    child_process.start_python = start_library_child
    threading.Thread(target=_serve_forked_programs, args=(listener, worker), daemon=True).start()
    serve(*worker)


# ---- the test worker's side -------------------------------------------------------------------------------------

class ForkedProcess:
    """A program forked by the server, with what the tests use of subprocess.Popen."""

    def __init__(self, server, pid, arguments, stdout, stderr):
        self._server = server
        self.pid = pid
        self.args = arguments
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = None
        self._readers = None
        self._outputs = None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self._close_streams()
        self.wait()

    def _close_streams(self):
        for stream in (self.stdout, self.stderr):
            if stream is not None and not stream.closed:
                stream.close()

    def poll(self):
        if self.returncode is None:
            self.returncode = self._server.returncode(self.pid, timeout=0)
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            self.returncode = self._server.returncode(self.pid, timeout=timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass  # it has just ended; the server's report of it is on its way

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout=None):
        """As Popen.communicate: the streams read side by side until they close; after `timeout` seconds,
        subprocess.TimeoutExpired with the process left running and what was read kept for the next call."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._readers is None:
            streams = (self.stdout, self.stderr)
            self._outputs = [None if stream is None else [] for stream in streams]
            self._readers = [threading.Thread(target=lambda stream=stream, sink=sink: sink.append(stream.read()),
                                              daemon=True)
                             for stream, sink in zip(streams, self._outputs) if stream is not None]
            for reader in self._readers:
                reader.start()
        for reader in self._readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if any(reader.is_alive() for reader in self._readers):
            raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        self._close_streams()
        return tuple(None if sink is None else (sink[0] if sink else "") for sink in self._outputs)


class _Server:
    """A connection to the server: the test worker's (`started`: the worker starts the server on first use) or a
    forked program's (`connected`: to the server that forked it)."""

    def __init__(self, connection, environment, process=None):
        self.environment = dict(environment)
        self._connection = connection
        self._process = process
        self._started = []
        self._returncodes = {}
        # The CPU time of the forked programs that have ended (they and the processes they waited for) and, at the
        # worker's connection, of the children that forked programs asked for.
        self.children_cpu_seconds = 0.0
        self._lock = threading.Lock()

    @classmethod
    def started(cls, environment):
        ours, theirs = socket.socketpair()
        process = subprocess.Popen([sys.executable, "-m", "tests.forked_scripts", str(theirs.fileno())],
                                   cwd=REPO_ROOT, env=dict(environment), pass_fds=[theirs.fileno()],
                                   stdin=subprocess.DEVNULL)
        theirs.close()
        server = cls(ours, environment, process)
        atexit.register(server.close)
        return server

    @classmethod
    def connected(cls, address, environment):
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(address)
        return cls(connection, environment)

    def close(self):
        """Ends the server (it returns when the connection closes) and waits for it, so that its CPU time is the
        worker's children's."""
        self._connection.close()
        if self._process is None:
            return
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def accepts(self, arguments, environment):
        if os.environ.get(FRESH_PROCESSES_VARIABLE) == "1" or (self._process and self._process.poll() is not None):
            return False
        # A code string is most often a check of what a fresh interpreter imports.
        if arguments[0] == "-c":
            return False
        if arguments[0] == "-m" and arguments[1].split(".")[0] == "peers":
            return False
        if arguments[0] != "-m" and not os.path.abspath(arguments[0]).startswith(REPO_ROOT + os.sep):
            return False
        # The repository is on every forked program's path already.
        theirs, ours = (dict(values, PYTHONPATH=_python_path_beyond_the_repository(values))
                        for values in (environment, self.environment))
        return not any(name.startswith(_START_UP_PREFIXES) and theirs.get(name) != ours.get(name)
                       for name in set(theirs) | set(ours))

    def start(self, arguments, cwd, environment, stdout, stderr):
        parent_ends, child_ends = [], [os.open(os.devnull, os.O_RDONLY)]
        for choice in (stdout, stderr):
            if choice is subprocess.PIPE:
                read_end, write_end = os.pipe()
                parent_ends.append(os.fdopen(read_end, "r", encoding="utf-8", errors="replace"))
                child_ends.append(write_end)
            else:
                parent_ends.append(None)
                if choice is subprocess.STDOUT:
                    child_ends.append(os.dup(child_ends[1]))
                elif choice is None or choice is subprocess.DEVNULL:
                    child_ends.append(os.open(os.devnull, os.O_WRONLY))
                else:
                    child_ends.append(os.dup(choice.fileno()))
        try:
            with self._lock:
                _send(self._connection, threading.Lock(),
                      {"arguments": list(arguments), "cwd": cwd, "env": dict(environment)}, child_ends)
                pid = self._await(lambda: self._started.pop(0) if self._started else None)
        finally:
            for fd in child_ends:
                os.close(fd)
        return ForkedProcess(self, pid, arguments, *parent_ends)

    def returncode(self, pid, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            return self._await(lambda: self._returncodes.pop(pid, None), deadline)

    def _await(self, ready, deadline=None):
        """Reads the server's messages until `ready()` is not None; None at the deadline."""
        while (value := ready()) is None:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                message, _ = _receive(self._connection, timeout=remaining)
            except TimeoutError:
                return None
            if message is None:
                raise RuntimeError("The tests' script server ended; rerun with ALBERT_TF_TEST_FRESH_PROCESSES=1.")
            if "started" in message:
                self._started.append(message["started"])
                continue
            if "exited" in message:
                self._returncodes[message["exited"]] = message["returncode"]
            self.children_cpu_seconds += message["cpu_seconds"]
        return value

    def read_pending(self):
        """Reads the messages that have arrived (the CPU time of forked programs' children among them)."""
        with self._lock:
            self._await(lambda: None, time.monotonic())


def _python_path_beyond_the_repository(environment):
    return os.pathsep.join(entry for entry in environment.get("PYTHONPATH", "").split(os.pathsep)
                           if entry and os.path.abspath(entry) != REPO_ROOT) or None


_server = None


def script_environment(**env):
    """The environment the tests run a program in: theirs, TensorFlow's C++ logs quiet (TF_CPP_MIN_LOG_LEVEL=2)
    unless `env` says otherwise, and `env`. The server starts in it with nothing added, so that a program whose
    `env` adds no start-up variable forks, whichever test in a worker runs one first."""
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env}


def popen(arguments, cwd=REPO_ROOT, env=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
    """Starts `python *arguments` as `subprocess.Popen(..., text=True)` would (stdout and stderr: PIPE, DEVNULL,
    an open file, or STDOUT for stderr): a fork of the worker's server when it can stand for a fresh process,
    else a fresh process."""
    global _server
    environment = dict(os.environ if env is None else env)
    if _server is None:
        _server = (_Server.connected(_program_address, _server_environment) if _program_address
                   else _Server.started(script_environment()))
    if _server.accepts(arguments, environment):
        return _server.start(arguments, cwd, environment, stdout, stderr)
    return subprocess.Popen([sys.executable, *arguments], cwd=cwd, env=environment, stdin=subprocess.DEVNULL,
                            stdout=stdout, stderr=stderr, text=True)


def forked_cpu_seconds():
    """The CPU seconds of the programs this worker's server has forked and seen end: they are the server's
    children, not this process's, so resource.RUSAGE_CHILDREN here does not count them."""
    if _server is None:
        return 0.0
    _server.read_pending()
    return _server.children_cpu_seconds


def run(arguments, cwd=REPO_ROOT, env=None, timeout=None):
    """`subprocess.run([sys.executable, *arguments], capture_output=True, text=True)`, through `popen`."""
    process = popen(arguments, cwd=cwd, env=env)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return subprocess.CompletedProcess([sys.executable, *arguments], process.returncode, stdout, stderr)


def start_library_child(arguments, environment):
    """albert_tf.benchmarking.child_process.start_python in the tests: through `popen`."""
    return popen(arguments, cwd=REPO_ROOT, env=environment)


if __name__ == "__main__":
    _serve_forever(socket.socket(fileno=int(sys.argv[1])))
