"""Child process for the test brokers (see tests/support/brokers.py). Two modes.

``python mock_cluster_child.py mock LIBRDKAFKA_PATH NUM_BROKERS``
    Runs a librdkafka mock cluster through ctypes, prints
    ``bootstrap <host:port,...>`` on stdout and then serves one command per
    stdin line, answering each with exactly one line, ``ok [...]`` or
    ``err <code> <message>``::

        create <topic> <partitions> <replication>
        delete <topic>
        leader <topic> <partition> <broker_id>     (-1 = no leader)
        rebalance_delay <ms>                       (group initial rebalance delay)
        down <broker_id> | up <broker_id>          (broker connectivity)
        rtt <broker_id> <ms>                       (added round-trip time)
        errors <api_key> <err> [<err> ...]          (next responses to api_key fail)
        apiversion <api_key> <min> <max>           (-1 -1 = not advertised)
        ping
        quit

    The child exits (destroying the cluster) on ``quit`` or when stdin closes,
    i.e. when the parent dies.

``python mock_cluster_child.py guard LOGFILE [--owner PID] [--grace S] -- CMD ARGS...``
    Starts CMD (stdout+stderr appended to LOGFILE) with PR_SET_PDEATHSIG so it
    is killed if this guard dies, prints ``pid <pid>``, then waits for stdin to
    close (parent died or stop()) or for CMD to exit. On stdin EOF it sends
    SIGTERM to CMD, then SIGKILL after S seconds (1). Exit status = CMD's exit status.
    With ``--owner PID`` it watches that process instead of stdin (a broker shared by
    pytest-xdist workers outlives the worker that started it, not the pytest run), and
    SIGTERM to the guard ends it the same way.

Set KAFKA_DS_MOCK_DEBUG (a librdkafka ``debug`` list, e.g. ``mock,protocol``) to
get the mock's debug log on stderr (the parent writes it to the broker log).
Only the standard library is imported, so start-up is fast.
"""

import ctypes
import io
import os
import signal
import subprocess
import sys
import threading
from typing import cast


def _set_pdeathsig(sig=signal.SIGKILL):
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except Exception:
        pass


class _Mock:
    def __init__(self, libpath, num_brokers):
        lib = ctypes.CDLL(libpath)
        self.lib = lib
        vp, cp, i32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32
        sig = {
            "rd_kafka_conf_new": ([], vp),
            "rd_kafka_conf_set": ([vp, cp, cp, cp, ctypes.c_size_t], ctypes.c_int),
            "rd_kafka_new": ([ctypes.c_int, vp, cp, ctypes.c_size_t], vp),
            "rd_kafka_destroy": ([vp], None),
            "rd_kafka_err2str": ([ctypes.c_int], cp),
            "rd_kafka_mock_cluster_new": ([vp, ctypes.c_int], vp),
            "rd_kafka_mock_cluster_bootstraps": ([vp], cp),
            "rd_kafka_mock_cluster_destroy": ([vp], None),
            "rd_kafka_mock_topic_create": ([vp, cp, ctypes.c_int, ctypes.c_int], ctypes.c_int),
            "rd_kafka_mock_topic_delete": ([vp, cp], ctypes.c_int),
            "rd_kafka_mock_partition_set_leader": ([vp, cp, i32, i32], ctypes.c_int),
            "rd_kafka_mock_group_initial_rebalance_delay_ms": ([vp, i32], None),
            "rd_kafka_mock_broker_set_down": ([vp, i32], ctypes.c_int),
            "rd_kafka_mock_broker_set_up": ([vp, i32], ctypes.c_int),
            "rd_kafka_mock_broker_set_rtt": ([vp, i32, ctypes.c_int], ctypes.c_int),
            "rd_kafka_mock_push_request_errors_array": (
                [vp, ctypes.c_int16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)],
                None,
            ),
            "rd_kafka_mock_set_apiversion": (
                [vp, ctypes.c_int16, ctypes.c_int16, ctypes.c_int16],
                ctypes.c_int,
            ),
        }
        for name, (args, res) in sig.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res

        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        settings = [("log_level", "3"), ("client.id", "kafka_ds_mock_owner")]
        debug = os.environ.get("KAFKA_DS_MOCK_DEBUG")  # e.g. "mock,protocol" -> stderr log
        if debug:
            settings += [("log_level", "7"), ("debug", debug)]
        for k, v in settings:
            if lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), errstr, 512) != 0:
                raise RuntimeError(errstr.value.decode())
        self.rk = lib.rd_kafka_new(0, conf, errstr, 512)  # RD_KAFKA_PRODUCER
        if not self.rk:
            raise RuntimeError("rd_kafka_new: " + errstr.value.decode())
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, num_brokers)
        if not self.mc:
            raise RuntimeError("rd_kafka_mock_cluster_new failed")
        self.bootstraps = lib.rd_kafka_mock_cluster_bootstraps(self.mc).decode()

    def destroy(self):
        if self.mc:
            self.lib.rd_kafka_mock_cluster_destroy(self.mc)
            self.mc = None
        if self.rk:
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None

    def _res(self, err):
        if err:
            return f"err {err} {self.lib.rd_kafka_err2str(err).decode()}"
        return "ok"

    def handle(self, words):
        lib, mc, cmd, a = self.lib, self.mc, words[0], words[1:]
        if cmd == "ping":
            return "ok"
        if cmd == "create":
            return self._res(
                lib.rd_kafka_mock_topic_create(mc, a[0].encode(), int(a[1]), int(a[2]))
            )
        if cmd == "delete":
            return self._res(lib.rd_kafka_mock_topic_delete(mc, a[0].encode()))
        if cmd == "leader":
            return self._res(
                lib.rd_kafka_mock_partition_set_leader(mc, a[0].encode(), int(a[1]), int(a[2]))
            )
        if cmd == "rebalance_delay":
            lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mc, int(a[0]))
            return "ok"
        if cmd == "down":
            return self._res(lib.rd_kafka_mock_broker_set_down(mc, int(a[0])))
        if cmd == "up":
            return self._res(lib.rd_kafka_mock_broker_set_up(mc, int(a[0])))
        if cmd == "rtt":
            return self._res(lib.rd_kafka_mock_broker_set_rtt(mc, int(a[0]), int(a[1])))
        if cmd == "errors":
            errs = [int(x) for x in a[1:]]
            arr = (ctypes.c_int * len(errs))(*errs)
            lib.rd_kafka_mock_push_request_errors_array(mc, int(a[0]), len(errs), arr)
            return "ok"
        if cmd == "apiversion":
            return self._res(lib.rd_kafka_mock_set_apiversion(mc, int(a[0]), int(a[1]), int(a[2])))
        return f"err -1 unknown command {cmd!r}"


def run_mock(libpath, num_brokers):
    try:
        mock = _Mock(libpath, num_brokers)
    except Exception as e:  # report start-up failure on the protocol line
        print(f"fail {e}", flush=True)
        return 1
    print(f"bootstrap {mock.bootstraps}", flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            try:
                reply = mock.handle(words)
            except (IndexError, ValueError) as e:
                reply = f"err -1 bad arguments: {e}"
            print(reply, flush=True)
    finally:
        mock.destroy()
    print("ok bye", flush=True)
    return 0


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_guard(logfile, cmd, owner_pid=None, grace=1.0):
    log = open(logfile, "ab", buffering=0)
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_set_pdeathsig,
    )  # safe: this process has one thread
    print(f"pid {proc.pid}", flush=True)
    done = threading.Event()
    # SIGTERM to the guard stops CMD the same way as the end of its watch
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    def _wait_stdin():
        try:
            # typeshed types stdin.buffer as BinaryIO (no read1); it is a BufferedReader
            while cast(io.BufferedReader, sys.stdin.buffer).read1(4096):
                pass
        except Exception:
            pass
        done.set()

    if owner_pid is None:
        threading.Thread(target=_wait_stdin, daemon=True).start()
    while not done.wait(0.2):
        if proc.poll() is not None:
            return proc.returncode
        if owner_pid is not None and not _pid_alive(owner_pid):
            break
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)  # tansu waits ~5 s for idle client connections on SIGTERM
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def main(argv):
    if argv[1] == "mock":
        return run_mock(argv[2], int(argv[3]))
    if argv[1] == "guard":
        sep = argv.index("--")
        options = argv[3:sep]
        owner = int(options[options.index("--owner") + 1]) if "--owner" in options else None
        grace = float(options[options.index("--grace") + 1]) if "--grace" in options else 1.0
        return run_guard(argv[2], argv[sep + 1 :], owner, grace)
    print("usage: mock LIB N | guard LOG [--owner PID] [--grace S] -- CMD...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
