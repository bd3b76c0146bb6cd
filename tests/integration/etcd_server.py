"""A throwaway etcd for the cluster tests: Debian's etcd-server (3.4) on free loopback ports, its data in a temporary
directory, stopped afterwards. start() returns once etcd logs that it serves clients (its output is read until then,
no polling). stop() and start() again keep the data (an outage); wipe() starts it afresh without it (an etcd that
lost its data)."""
import os
import shutil
import signal
import subprocess
import tempfile
import threading

from pg_server import free_port


class EtcdServer:
    START_TIMEOUT_S = 60

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="inferd-etcd-")
        self.port = free_port()
        self.peer_port = free_port()
        self.proc = None
        self.log = []
        self.start()

    @property
    def url(self):
        return "etcd://127.0.0.1:%d" % self.port

    def start(self):
        peer = "http://127.0.0.1:%d" % self.peer_port
        client = "http://127.0.0.1:%d" % self.port
        self.proc = subprocess.Popen(
            ["etcd", "--name", "t", "--data-dir", os.path.join(self.dir, "data"), "--listen-client-urls", client,
             "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "t=" + peer, "--log-outputs", "stderr"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ready = threading.Event()

        def read():
            for line in self.proc.stdout:  # ends when etcd exits
                self.log.append(line)
                if "ready to serve client requests" in line:
                    ready.set()
            ready.set()
        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(self.START_TIMEOUT_S) or self.proc.poll() is not None:
            self.proc.kill()
            raise RuntimeError("etcd did not start:\n" + "".join(self.log[-40:]))

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None

    def wipe(self):
        """Stops etcd, deletes its data and starts it again on the same ports: every lease and key is gone."""
        self.stop()
        shutil.rmtree(os.path.join(self.dir, "data"), ignore_errors=True)
        self.start()

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def get_prefix(self, prefix):
        """{key: value} of every key under `prefix`, read with etcdctl."""
        p = subprocess.run(["etcdctl", "--endpoints", "127.0.0.1:%d" % self.port, "get", "--prefix", prefix],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
                           env=dict(os.environ, ETCDCTL_API="3"))
        if p.returncode != 0:
            raise RuntimeError("etcdctl get: " + p.stdout)
        lines = p.stdout.splitlines()
        return dict(zip(lines[0::2], lines[1::2]))
