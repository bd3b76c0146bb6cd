"""A throwaway Redis server for the tests: redis-server on a free loopback port, no persistence, files in a temporary
directory, shut down afterwards. start() returns once the server logs that it accepts connections (its output is
read until then, no polling). Debian's redis-server provides the binary; redis-cli runs commands."""
import shutil
import subprocess
import tempfile
import threading

from pg_server import free_port


class RedisServer:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="inferd-redis-")
        self.port = free_port()
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no", "--dir", self.dir, "--logfile", ""],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log = []
        for line in self.proc.stdout:  # ends if redis-server exits
            log.append(line)
            if "Ready to accept connections" in line:
                break
        else:
            raise RuntimeError("redis-server did not start:\n" + "".join(log))
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # keep its pipe drained

    def stop(self):
        if self.proc is None:
            return
        self.cli("SHUTDOWN", "NOSAVE", check=False)
        self.proc.wait(timeout=60)
        self.proc = None

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def cli(self, *args, check=True):
        p = subprocess.run(["redis-cli", "-p", str(self.port), *args], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        if check and (p.returncode != 0 or p.stdout.startswith("ERR")):
            raise RuntimeError("redis-cli %s: %s" % (" ".join(args), p.stdout))
        return p.stdout
