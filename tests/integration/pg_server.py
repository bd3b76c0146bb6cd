"""A throwaway PostgreSQL server for the tests: initdb into a temporary directory, pg_ctl on a free loopback port,
trust authentication, stopped and removed afterwards. As root, the server runs as the `postgres` user (initdb
refuses root). Debian's postgresql-15 provides the binaries; psql runs queries."""
import os
import shutil
import socket
import subprocess
import tempfile

BIN = "/usr/lib/postgresql/15/bin"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="inferd-pg-")
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.as_user = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._run([os.path.join(BIN, "initdb"), "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
                   "--no-sync"])
        self.start()

    def _run(self, cmd, check=True):
        return subprocess.run(self.as_user + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              check=check, timeout=120)

    def start(self):
        """pg_ctl -w waits (bounded by -t) until the server accepts connections."""
        self._run([os.path.join(BIN, "pg_ctl"), "-D", self.data, "-w", "-t", "60", "-l",
                   os.path.join(self.dir, "log"), "-o",
                   "-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c fsync=off" %
                   (self.port, self.dir), "start"])

    def stop(self, mode="fast"):
        self._run([os.path.join(BIN, "pg_ctl"), "-D", self.data, "-w", "-t", "60", "-m", mode, "stop"], check=False)

    def close(self):
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def conninfo(self):
        return "host=127.0.0.1 port=%d user=postgres dbname=postgres" % self.port

    def psql(self, sql, *extra):
        """Runs SQL; returns the unaligned, tuples-only output."""
        p = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-h", "127.0.0.1", "-p",
                            str(self.port), "-U", "postgres", "-d", "postgres", *extra, "-c", sql],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        if p.returncode != 0:
            raise RuntimeError("psql failed: %s" % p.stderr)
        return p.stdout
