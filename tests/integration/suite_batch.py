"""Integration suite: `inferd batch`, batch prediction jobs run in-process (run by run_tests.py).

Outputs are compared with the same TorchScript model run by python3-torch; the
sinks are read back with Python's own sqlite3 and csv modules.
"""
import csv
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401
import pg_server  # noqa: E402
import redis_server  # noqa: E402



def workdir(name):
    d = os.path.abspath(os.path.join(C.ARGS.workdir, "batch", name))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write_csv(path, keys, x, replace=None):
    replace = replace or {}
    with open(path, "w") as f:
        f.write("id," + ",".join("f%d" % i for i in range(x.shape[1])) + "\n")
        for i, (k, row) in enumerate(zip(keys, x)):
            f.write(replace.get(i, k + "," + ",".join(repr(float(v)) for v in row)) + "\n")


def batch(spec_path, *extra, check=True):
    p = subprocess.run([C.ARGS.inferd, "batch", "--model-repository", C.REPO, "--job", spec_path,
                        "--progress", "none", "--intra-op-threads", "1", *extra],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError("inferd batch exited %d:\n%s" % (p.returncode, p.stderr))
    return p


def checkpoint(db):
    """(rows_done, finished) of the only job in the sink, or None before its first commit."""
    if not os.path.exists(db):
        return None
    try:
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
        try:
            row = con.execute("SELECT rows_done, finished FROM inferd_job_checkpoints").fetchone()
        finally:
            con.close()
    except sqlite3.OperationalError:  # the table is not there yet
        return None
    return row


def mlp_inputs(n, seed):
    rng = np.random.default_rng(seed)
    return ["k%d" % i for i in range(n)], rng.standard_normal((n, 8)).astype(np.float32)


def slow_csv_job(name, n, seed):
    """A CSV job on mlp into SQLite that takes seconds (12-row requests one at a time, each waiting out mlp's 2 ms
    batching delay), so a signal lands inside it. Returns (keys, x, db, spec_path)."""
    d = workdir(name)
    keys, x = mlp_inputs(n, seed)
    write_csv(os.path.join(d, "in.csv"), keys, x)
    db = os.path.join(d, "out.db")
    spec = {"model": "mlp", "source": {"type": "csv", "path": os.path.join(d, "in.csv")},
            "sink": {"type": "sqlite", "path": db, "table": "predictions"}, "key": "id",
            "inputs": {"x": ["f%d" % i for i in range(8)]}, "outputs": ["y"],
            "rows_per_request": 12, "max_in_flight": 1, "commit_rows": 1000}
    spec_path = os.path.join(d, "job.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    return keys, x, db, spec_path


def start_batch(spec_path):
    return subprocess.Popen([C.ARGS.inferd, "batch", "--model-repository", C.REPO, "--job", spec_path,
                             "--progress", "none", "--intra-op-threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for_rows(test, proc, db, rows):
    """Waits (bounded) until the job's checkpoint counts `rows`; the job ending first fails the test."""
    deadline = time.monotonic() + 300
    while True:
        cp = checkpoint(db)
        if cp and cp[0] >= rows:
            return
        test.assertLess(time.monotonic(), deadline, "the job never reached row %d" % rows)
        try:  # the poll interval; the job ending is an error
            proc.wait(timeout=0.005)
            test.fail("the job ended before row %d: %s" % (rows, proc.stderr.read() or ""))
        except subprocess.TimeoutExpired:
            pass


class Batch(unittest.TestCase):
    def test_a_40k_row_csv_job_killed_with_sigkill_resumes_and_writes_each_key_once(self):
        n = 40000
        keys, x, db, spec_path = slow_csv_job("sigkill", n, 1)
        proc = start_batch(spec_path)
        try:
            wait_for_rows(self, proc, db, random.Random().randint(4000, 30000))  # a random point inside the job
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
            proc.stderr.close()
        done, finished = checkpoint(db)
        self.assertLess(done, n, "killed after the end")
        self.assertEqual(finished, 0)
        resumed = batch(spec_path)
        self.assertIn("succeeded", resumed.stderr)
        self.assertIn("(%s resumed from the checkpoint)" % format(done, ","), resumed.stderr)

        con = sqlite3.connect(db)
        rows = con.execute("SELECT id, model_name, model_version, y FROM predictions").fetchall()
        self.assertEqual(len(rows), n)
        self.assertEqual(con.execute("SELECT count(DISTINCT id) FROM predictions").fetchone()[0], n)
        self.assertEqual(con.execute("SELECT rows_done, rows_written, row_errors, finished FROM inferd_job_checkpoints")
                         .fetchone(), (n, n, 0, 1))
        con.close()
        ref = C.torch_ref("mlp", x)
        got = {k: json.loads(y) for k, name, version, y in rows}
        self.assertEqual({r[1] for r in rows}, {"mlp"})
        self.assertEqual({r[2] for r in rows}, {"1"})
        out = np.array([got[k] for k in keys], np.float32)
        C.assert_matches_torch(out, ref)  # FP32 written with 9 digits reads back exactly; PyTorch's batch may round 1 ulp apart

    def test_sigterm_stops_the_job_at_a_commit_with_exit_3_and_the_same_command_resumes(self):
        n = 12000  # a few seconds at 12-row requests one at a time; the signal comes after the second commit
        _, _, db, spec_path = slow_csv_job("sigterm", n, 2)
        proc = start_batch(spec_path)
        try:
            wait_for_rows(self, proc, db, 2000)
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=120)
            err = proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)
            proc.stderr.close()
        self.assertEqual(rc, 3, err)
        self.assertIn("interrupted", err)
        done, finished = checkpoint(db)
        self.assertEqual(finished, 0)
        resumed = batch(spec_path)
        self.assertIn("succeeded", resumed.stderr)
        self.assertIn("(%s resumed from the checkpoint)" % format(done, ","), resumed.stderr)
        con = sqlite3.connect(db)
        self.assertEqual(con.execute("SELECT count(DISTINCT id), count(*) FROM predictions").fetchone(), (n, n))
        con.close()

    def test_row_errors_are_recorded_and_the_job_goes_on(self):
        d = workdir("errors")
        keys, x = mlp_inputs(50, 2)
        src = os.path.join(d, "in.jsonl")
        with open(src, "w") as f:
            for i, (k, row) in enumerate(zip(keys, x)):
                if i == 10:
                    f.write(json.dumps({"id": k, "features": [float(v) for v in row[:7]]}) + "\n")  # 7 of 8
                elif i == 20:
                    f.write("{not json\n")
                else:
                    f.write(json.dumps({"id": k, "features": [float(v) for v in row]}) + "\n")
        out = os.path.join(d, "out.csv")
        spec = {"model": "mlp", "source": {"type": "jsonl", "path": src}, "sink": {"type": "csv", "path": out},
                "key": "id", "inputs": {"x": "features"}}
        spec_path = os.path.join(d, "job.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        p = batch(spec_path)
        self.assertIn("48 written, 2 errors", p.stderr)
        self.assertIn("(key 'k10'): input 'x' needs 8 elements (dims [8]), the row gives 7", p.stderr)
        self.assertIn("malformed JSON line", p.stderr)
        with open(out) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 48)
        self.assertEqual(set(rows[0]), {"id", "model_name", "model_version", "predicted_at", "y"})
        ref = C.torch_ref("mlp", x)
        for r in rows:
            i = int(r["id"][1:])
            C.assert_matches_torch(np.array(json.loads(r["y"]), np.float32), ref[i])
        with open(out + ".errors.jsonl") as f:
            errors = [json.loads(line) for line in f]
        self.assertEqual([(e["row_ordinal"], e["key"]) for e in errors], [(10, "k10"), (20, "")])

    def test_an_sqlite_query_as_the_source(self):
        d = workdir("sql")
        keys, x = mlp_inputs(300, 3)
        src = os.path.join(d, "features.db")
        con = sqlite3.connect(src)
        con.execute("CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, region TEXT, "
                    + ", ".join("f%d REAL" % i for i in range(8)) + ")")
        con.executemany("INSERT INTO customers VALUES (?, ?, " + ", ".join("?" * 8) + ")",
                        [(i, "eu" if i % 2 else "us", *map(float, row)) for i, row in enumerate(x)])
        con.commit()
        con.close()
        out = os.path.join(d, "out.jsonl")
        spec = {"model": "mlp", "source": {"type": "sqlite", "path": src,
                                           "query": "SELECT * FROM customers WHERE region = 'eu';"},
                "sink": {"type": "jsonl", "path": out}, "key": "customer_id",
                "inputs": {"x": ["f%d" % i for i in range(8)]}}
        spec_path = os.path.join(d, "job.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        p = batch(spec_path)
        self.assertIn("150 written, 0 errors", p.stderr)
        with open(out) as f:
            rows = [json.loads(line) for line in f]
        self.assertEqual(sorted(int(r["customer_id"]) for r in rows), list(range(1, 300, 2)))
        ref = C.torch_ref("mlp", x)
        for r in rows:
            C.assert_matches_torch(np.array(r["y"], np.float32), ref[int(r["customer_id"])])

    def test_postgres_into_postgres_equals_pytorch_and_survives_the_database_stopping(self):
        d = workdir("postgres")
        pg = pg_server.PgServer()
        try:
            n = 30000
            keys, x = mlp_inputs(n, 5)
            write_csv(os.path.join(d, "customers.csv"), keys, x)
            pg.psql("CREATE TABLE customers (id TEXT PRIMARY KEY, " + ", ".join("f%d REAL" % i for i in range(8)) + ")")
            pg.psql("\\copy customers FROM '%s' CSV HEADER" % os.path.join(d, "customers.csv"))
            config = os.path.join(d, "jobs.json")
            with open(config, "w") as f:
                json.dump({"connections": {"warehouse": {"type": "postgres", "conninfo": pg.conninfo}}}, f)
            spec = {"model": "mlp", "source": {"type": "postgres", "connection": "warehouse",
                                               "query": "SELECT * FROM customers"},
                    "sink": {"type": "postgres", "connection": "warehouse", "table": "scores"}, "key": "id",
                    "inputs": {"x": ["f%d" % i for i in range(8)]},
                    "rows_per_request": 12, "max_in_flight": 1, "commit_rows": 1000}
            spec_path = os.path.join(d, "job.json")
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            cmd = [C.ARGS.inferd, "batch", "--model-repository", C.REPO, "--job", spec_path, "--progress", "none",
                   "--intra-op-threads", "1", "--jobs-config", config]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            stop_at = random.Random().randint(3000, 20000)
            deadline = time.monotonic() + 300

            def done():
                out = pg.psql("SELECT rows_done FROM inferd_job_checkpoints") if pg.psql(
                    "SELECT to_regclass('inferd_job_checkpoints') IS NOT NULL") == "t\n" else ""
                return int(out) if out.strip() else 0

            while done() < stop_at:
                self.assertIsNone(proc.poll(), "the job ended before the database stopped")
                self.assertLess(time.monotonic(), deadline, "the job never reached row %d" % stop_at)
            pg.stop()  # the database goes away mid-job
            _, err = proc.communicate(timeout=120)
            self.assertEqual(proc.returncode, 1, err)
            self.assertIn("PostgreSQL connection 'warehouse'", err)
            self.assertNotIn("host=", err)  # the conninfo is never shown
            pg.start()
            stopped_at = done()
            self.assertLess(stopped_at, n)
            resumed = batch(spec_path, "--jobs-config", config)
            self.assertIn("(%s resumed from the checkpoint)" % format(stopped_at, ","), resumed.stderr)
            self.assertEqual(pg.psql("SELECT count(*), count(DISTINCT id) FROM scores"), "%d|%d\n" % (n, n))
            self.assertEqual(pg.psql("SELECT DISTINCT model_name || ' ' || model_version FROM scores"), "mlp 1\n")
            got = {}
            for line in pg.psql("SELECT id, y::text FROM scores").splitlines():
                k, y = line.split("|", 1)
                got[k] = json.loads(y)
            ref = C.torch_ref("mlp", x)
            C.assert_matches_torch(np.array([got[k] for k in keys], np.float32), ref)
        finally:
            pg.close()

    def test_a_job_into_redis_killed_with_sigkill_resumes_and_writes_each_key_once(self):
        d = workdir("redis")
        redis = redis_server.RedisServer()
        try:
            n = 20000
            keys, x = mlp_inputs(n, 9)
            write_csv(os.path.join(d, "in.csv"), keys, x)
            config = os.path.join(d, "jobs.json")
            with open(config, "w") as f:
                json.dump({"connections": {"online": {"type": "redis", "port": redis.port}}}, f)
            spec = {"model": "mlp", "source": {"type": "csv", "path": os.path.join(d, "in.csv")},
                    "sink": {"type": "redis", "connection": "online", "table": "scores"}, "key": "id",
                    "inputs": {"x": ["f%d" % i for i in range(8)]}, "outputs": ["y"],
                    "rows_per_request": 4, "max_in_flight": 1, "commit_rows": 200}
            spec_path = os.path.join(d, "job.json")
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            cmd = [C.ARGS.inferd, "batch", "--model-repository", C.REPO, "--job", spec_path, "--progress", "none",
                   "--intra-op-threads", "1", "--jobs-config", config, "--job-id", "redisjob"]

            def done():
                out = redis.cli("HGET", "inferd_job_checkpoints:redisjob", "rows_done").strip()
                return int(out) if out else 0

            kill_at = random.Random().randint(1000, 10000)
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                deadline = time.monotonic() + 300
                while done() < kill_at:
                    self.assertIsNone(proc.poll(), "the job ended before the kill")
                    self.assertLess(time.monotonic(), deadline, "the job never reached row %d" % kill_at)
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
                proc.stderr.close()
            killed_at = done()
            self.assertLess(killed_at, n, "killed after the end")
            resumed = batch(spec_path, "--jobs-config", config, "--job-id", "redisjob")
            self.assertIn("(%s resumed from the checkpoint)" % format(killed_at, ","), resumed.stderr)
            self.assertEqual(redis.cli("HGET", "inferd_job_checkpoints:redisjob", "finished").strip(), "1")
            # Every key once, each equal to PyTorch's answer (one Lua call reads them all).
            script = ("local out = {} for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
                      "out[#out + 1] = k out[#out + 1] = redis.call('HGET', k, 'y') end return out")
            lines = redis.cli("--raw", "EVAL", script, "0", "scores:*").splitlines()
            got = {lines[i][len("scores:"):]: json.loads(lines[i + 1]) for i in range(0, len(lines), 2)}
            self.assertEqual(len(got), n)
            self.assertEqual(redis.cli("HGET", "scores:k0", "model_name").strip(), "mlp")
            C.assert_matches_torch(np.array([got[k] for k in keys], np.float32), C.torch_ref("mlp", x))
        finally:
            redis.close()

    def test_malformed_specs_are_refused_and_nothing_is_written(self):
        d = workdir("bad")
        keys, x = mlp_inputs(5, 4)
        write_csv(os.path.join(d, "in.csv"), keys, x)
        con = sqlite3.connect(os.path.join(d, "src.db"))
        con.execute("CREATE TABLE t (id TEXT, v TEXT)")
        con.commit()
        con.close()
        out = os.path.join(d, "out.db")
        base = {"model": "mlp", "source": {"type": "csv", "path": os.path.join(d, "in.csv")},
                "sink": {"type": "sqlite", "path": out, "table": "preds"}, "key": "id",
                "inputs": {"x": ["f%d" % i for i in range(8)]}}
        cases = [
            ({"inputs": {"x": ["f0", "nope"]}}, "names column 'nope', which the source does not have"),
            ({"key": "customer"}, "'key' names column 'customer'"),
            ({"model": "no_such_model"}, "no_such_model"),
            ({"inputs": {"w": ["f0"]}}, "names 'w', which model 'mlp' does not take"),
            ({"outputs": ["z"]}, "'outputs' names 'z'"),
            ({"rows_per_request": -1}, "'rows_per_request' must be in"),
            ({"source": {"type": "sqlite", "path": os.path.join(d, "src.db"), "query": "SELEC * FROM t"}}, "SQL error"),
            ({"source": {"type": "sqlite", "path": os.path.join(d, "src.db"), "query": "DELETE FROM t"}},
             "read-only SELECT"),
            ({"source": {"type": "sqlite", "path": os.path.join(d, "src.db"),
                         "query": "SELECT * FROM t; DROP TABLE t"}}, "only one SQL statement"),
            ({"source": {"type": "csv", "path": os.path.join(d, "missing.csv")}}, "cannot open CSV source"),
        ]
        for change, want in cases:
            spec = dict(base, **change)
            spec_path = os.path.join(d, "job.json")
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            p = batch(spec_path, check=False)
            self.assertEqual(p.returncode, 2, "%s: %s" % (change, p.stderr))
            self.assertIn(want, p.stderr, change)
            self.assertFalse(os.path.exists(out), change)
        con = sqlite3.connect(os.path.join(d, "src.db"))
        self.assertEqual(con.execute("SELECT count(*) FROM sqlite_master WHERE name = 't'").fetchone()[0], 1)
        con.close()
        # An unreachable PostgreSQL server and an SQL error on a reachable one.
        config = os.path.join(d, "jobs.json")
        pg = pg_server.PgServer()
        try:
            with open(config, "w") as f:
                json.dump({"connections": {
                    "down": {"type": "postgres", "conninfo": "host=127.0.0.1 port=%d user=x password=hunter2 "
                                                             "connect_timeout=5" % pg_server.free_port()},
                    "up": {"type": "postgres", "conninfo": pg.conninfo}}}, f)
            for change, want in [
                ({"source": {"type": "postgres", "connection": "down", "query": "SELECT 1"}},
                 "cannot connect to PostgreSQL connection 'down'"),
                ({"source": {"type": "postgres", "connection": "up", "query": "SELECT * FROM missing"}},
                 'relation "missing" does not exist'),
                ({"source": {"type": "postgres", "connection": "up", "query": "SELECT 1 AS id; DROP TABLE x"}},
                 "syntax error"),
                ({"sink": {"type": "postgres", "connection": "nope", "table": "t"}}, "does not define"),
            ]:
                spec = dict(base, **change)
                spec_path = os.path.join(d, "job.json")
                with open(spec_path, "w") as f:
                    json.dump(spec, f)
                p = batch(spec_path, "--jobs-config", config, check=False)
                self.assertEqual(p.returncode, 2, "%s: %s" % (change, p.stderr))
                self.assertIn(want, p.stderr, change)
                self.assertNotIn("hunter2", p.stderr)
            self.assertEqual(pg.psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), "0\n")
        finally:
            pg.close()


if __name__ == "__main__":
    unittest.main()
