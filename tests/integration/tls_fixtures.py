"""Certificates for the TLS tests, made with the openssl CLI in a folder of their own: two CAs, server certificates
for 127.0.0.1/localhost signed by the first (two of them, for rotation), client certificates signed by each CA
(mutual TLS: one accepted, one from the other CA refused), and cluster nodes' certificates (server and client use)
signed by each."""
import os
import subprocess


def _run(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


def _ca(d, name):
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
         "-subj", "/CN=inferd test %s" % name, "-keyout", name + ".key", "-out", name + ".pem", cwd=d)


def _leaf(d, name, ca, cn, server, client=False):
    _run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=" + cn,
         "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        if server:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth%s\n"
                    % (",clientAuth" if client else ""))
        else:
            f.write("extendedKeyUsage=clientAuth\n")
    _run("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key", "-CAcreateserial",
         "-days", "2", "-extfile", name + ".ext", "-out", name + ".pem", cwd=d)


def make(d):
    """Writes the files into `d` (made if needed) once; returns {name: path} for every .pem and .key."""
    d = os.path.abspath(d)
    os.makedirs(d, exist_ok=True)
    if not os.path.exists(os.path.join(d, "done-2")):
        _ca(d, "ca")
        _ca(d, "other_ca")
        _leaf(d, "server", "ca", "inferd server one", True)
        _leaf(d, "server2", "ca", "inferd server two", True)
        _leaf(d, "client", "ca", "inferd client", False)
        _leaf(d, "stranger", "other_ca", "stranger client", False)
        _leaf(d, "node", "ca", "inferd node", True, client=True)
        _leaf(d, "other_node", "other_ca", "inferd node of another CA", True, client=True)
        open(os.path.join(d, "done-2"), "w").close()
    return {f[:-len(".pem")] if f.endswith(".pem") else f.replace(".", "_"): os.path.join(d, f)
            for f in os.listdir(d) if f.endswith((".pem", ".key"))}
