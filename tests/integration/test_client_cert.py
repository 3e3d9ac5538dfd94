# SPDX-License-Identifier: Apache-2.0
"""Client-certificate authentication, end to end. leaderd-apiserver authenticates a TLS
client certificate signed by its CA as the client its Subject CN names, as kube-apiserver
does; real leaderd replicas then elect with kubeconfigs that carry a certificate instead of
a token: RSA keys inline (client-certificate-data), EC keys as files (client-certificate),
a token replica and a certificate replica handing over to each other, and a certificate
from a foreign CA, which must never lead.

Runs under tests/integration/run.py or alone: python3 tests/integration/test_client_cert.py
"""

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "support"))  # leaderd_testing

from leaderd_testing.apiserver import (LEASES, ApiServer, binary_path,  # noqa: E402
                                       write_kubeconfig)
from leaderd_testing.cluster import FAST, Replica, Watcher, stop_all, wait_until  # noqa: E402

NS = "default"
EC = ["ec1", "ec2"]
RSA = ["rsa1", "rsa2"]
TOKEN = "tok"  # only ever uses its token
CLIENTS = EC + RSA + [TOKEN]
LEASE = FAST["lease_duration"]
RETRY = FAST["retry_period"]
RENEW = FAST["renew_deadline"]
ELECTION_BOUND = LEASE + 2 * RETRY + 2


def lease(name, holder):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def user_fields(kubeconfig):
    """The user entry's fields of a kubeconfig the server wrote: {name: value}."""
    text = read(kubeconfig).decode()
    user = text.split("\nusers:\n", 1)[1].split("\ncontexts:", 1)[0]
    return {k: json.loads(v) for k, v in re.findall(r"^    ([\w-]+): (\".*\")$", user, re.M)}


def foreign_certificate(workdir, name):
    """(cert, key) for client name issued by another server's CA: it has the right CN
    but no chain to the CA under test."""
    other = ApiServer(os.path.join(workdir, "foreign"), [name], verbose=False)
    other.start()
    other.stop()
    return other.client_cert(name)


class KubeconfigReplica(Replica):
    """A Replica started with --kubeconfig PATH instead of its client's token kubeconfig
    (cluster.Replica always takes api.kubeconfig(client))."""

    def __init__(self, api, client, workdir, kubeconfig, **kw):
        super().__init__(api, client, workdir, **kw)
        self.kubeconfig = kubeconfig

    def argv(self):
        argv = super().argv()
        argv[argv.index("--kubeconfig") + 1] = self.kubeconfig
        return argv


class ServerTestCase(unittest.TestCase):
    """A fresh server with EC, RSA and token clients per test."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="leaderd-it-cert-")
        self.srv = ApiServer(os.path.join(self.tmp, "api"), CLIENTS, rsa_clients=RSA)
        self.srv.start()

    def tearDown(self):
        status = self.srv.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.assertEqual(status, 0, "leaderd-apiserver exit status")

    def create(self, name, holder, **auth):
        """POSTs Lease name with the credentials in auth (see ApiServer.request)."""
        return self.srv.json_request("POST", LEASES % NS, lease(name, holder), **auth)

    def writers(self, name):
        """Clients the server credited with the successful writes of Lease name."""
        return [e["client"] for e in self.srv.write_log() if e["name"] == name]


class TestServerClientCerts(ServerTestCase):
    """The API server's side: who a certificate authenticates, and what it refuses."""

    def test_key_types_and_kubeconfigs(self):
        for name in CLIENTS:
            crt, key = self.srv.client_cert(name)
            self.assertTrue(read(crt).startswith(b"-----BEGIN CERTIFICATE-----\n"), name)
            head = b"-----BEGIN RSA PRIVATE KEY-----\n" if name in RSA else \
                b"-----BEGIN PRIVATE KEY-----\n"
            self.assertTrue(read(key).startswith(head), name)
            self.assertEqual(os.stat(key).st_mode & 0o777, 0o600, name)
            inline = user_fields(self.srv.cert_kubeconfig(name))
            self.assertEqual(sorted(inline), ["client-certificate-data", "client-key-data"])
            self.assertEqual(base64.b64decode(inline["client-certificate-data"]), read(crt))
            self.assertEqual(base64.b64decode(inline["client-key-data"]), read(key))
            files = user_fields(self.srv.cert_kubeconfig(name, files=True))
            self.assertEqual(files, {"client-certificate": crt, "client-key": key})

    def test_certificate_authenticates_its_cn(self):
        for i, name in enumerate(EC + RSA):
            status, obj = self.create("l%d" % i, name, cert=self.srv.client_cert(name))
            self.assertEqual(status, 201, obj)
            self.assertEqual(self.writers("l%d" % i), [name])
            self.assertEqual(self.srv.stats()[name]["create"], {"201": 1})

    def test_certificate_wins_over_a_token(self):
        status, _ = self.create("both", "x", cert=self.srv.client_cert("ec1"),
                                token=self.srv.token(TOKEN))
        self.assertEqual(status, 201)
        self.assertEqual(self.writers("both"), ["ec1"])

    def test_unverified_certificates_get_401(self):
        path = "/apis/coordination.k8s.io/v1/leases"
        status, body = self.srv.json_request("GET", path, token="")
        self.assertEqual(status, 401)
        self.assertEqual(body["reason"], "Unauthorized")
        foreign = foreign_certificate(self.tmp, "ec1")
        self.assertEqual(self.srv.json_request("GET", path, cert=foreign)[0], 401)
        self.assertNotIn("ec1", self.srv.stats())
        # A valid token still authenticates next to a certificate that does not.
        status, _ = self.create("tokwin", "x", cert=foreign, token=self.srv.token(TOKEN))
        self.assertEqual(status, 201)
        self.assertEqual(self.writers("tokwin"), [TOKEN])

    @unittest.skipUnless(shutil.which("openssl"), "openssl not installed")
    def test_certificate_must_be_for_client_auth(self):
        path = LEASES % NS
        client = self.openssl_cert("ec1", "clientAuth")
        self.assertEqual(self.srv.json_request("GET", path, cert=client)[0], 200)
        self.assertEqual(self.srv.stats()["ec1"]["list"], {"200": 1})
        server = self.openssl_cert("ec1", "serverAuth")
        self.assertEqual(self.srv.json_request("GET", path, cert=server)[0], 401)
        self.assertEqual(self.srv.stats()["ec1"]["list"], {"200": 1})

    def openssl_cert(self, cn, usage):
        """(cert, key) for cn from the server's own CA with extended key usage usage,
        made by the openssl command."""
        base = os.path.join(self.tmp, "%s-%s" % (cn, usage))
        with open(base + ".ext", "w") as f:
            f.write("extendedKeyUsage=%s\n" % usage)
        run = dict(check=True, capture_output=True, timeout=30)
        subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", base + ".key",
                        "-subj", "/CN=" + cn, "-out", base + ".csr"], **run)
        subprocess.run(["openssl", "x509", "-req", "-in", base + ".csr", "-days", "1",
                        "-CA", self.srv.ca, "-CAkey", os.path.join(self.srv.dir, "ca.key"),
                        "-set_serial", "0x1234", "-extfile", base + ".ext",
                        "-out", base + ".crt"], **run)
        return base + ".crt", base + ".key"

    def test_faults_apply_by_certificate_name(self):
        self.srv.set_faults("rsa1", error_rate=1.0, error_code=503)
        path = LEASES % NS
        self.assertEqual(
            self.srv.json_request("GET", path, cert=self.srv.client_cert("rsa1"))[0], 503)
        self.assertEqual(self.srv.json_request("GET", path, client="rsa1")[0], 503)
        self.assertEqual(
            self.srv.json_request("GET", path, cert=self.srv.client_cert("rsa2"))[0], 200)
        self.srv.clear_faults()
        self.assertEqual(
            self.srv.json_request("GET", path, cert=self.srv.client_cert("rsa1"))[0], 200)

    def test_revoking_tokens_leaves_the_certificate(self):
        self.srv.revoke_token("ec2")
        path = LEASES % NS
        self.assertEqual(self.srv.json_request("GET", path, client="ec2")[0], 401)
        self.assertEqual(
            self.srv.json_request("GET", path, cert=self.srv.client_cert("ec2"))[0], 200)

    def test_certificates_kept_across_restart(self):
        before = {n: (read(c), read(k)) for n in CLIENTS for c, k in [self.srv.client_cert(n)]}
        self.assertEqual(self.srv.restart(), 0)
        for name in CLIENTS:
            crt, key = self.srv.client_cert(name)
            self.assertEqual((read(crt), read(key)), before[name], name)
            self.assertEqual(self.srv.json_request("GET", LEASES % NS,
                                                   cert=(crt, key))[0], 200, name)

    def test_key_type_of_a_certificate_follows_the_option(self):
        self.srv.stop()
        rsa_key = read(self.srv.client_cert("rsa1")[1])
        self.srv.rsa_clients = ["ec1"]
        self.srv.start()
        self.assertTrue(read(self.srv.client_cert("ec1")[1]).startswith(
            b"-----BEGIN RSA PRIVATE KEY-----\n"))
        self.assertTrue(read(self.srv.client_cert("rsa1")[1]).startswith(
            b"-----BEGIN PRIVATE KEY-----\n"))
        self.assertNotEqual(read(self.srv.client_cert("rsa1")[1]), rsa_key)
        self.assertEqual(self.srv.json_request(
            "GET", LEASES % NS, cert=self.srv.client_cert("ec1"))[0], 200)

    def test_rsa_client_must_be_a_client(self):
        out = subprocess.run([binary_path(), "--dir", os.path.join(self.tmp, "x"),
                              "--clients", "a", "--rsa-clients", "a,nobody"],
                             capture_output=True, timeout=30)
        self.assertEqual(out.returncode, 2)
        self.assertIn(b"nobody is not in --clients", out.stderr)

    @unittest.skipUnless(shutil.which("kubectl"), "kubectl not installed")
    def test_kubectl_with_client_certificates(self):
        self.assertEqual(self.create("kube", "someone", client=TOKEN)[0], 201)
        for name, files in (("rsa1", False), ("ec1", True)):
            env = dict(os.environ, HOME=self.tmp,
                       KUBECONFIG=self.srv.cert_kubeconfig(name, files=files))
            out = subprocess.run(["kubectl", "--cache-dir", os.path.join(self.tmp, "kc"),
                                  "get", "lease", "kube", "-o", "json"],
                                 capture_output=True, text=True, env=env, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(json.loads(out.stdout)["spec"]["holderIdentity"], "someone")
            self.assertIn("get", self.srv.stats()[name])


class TestLeaderdClientCerts(ServerTestCase):
    """Real leaderd replicas authenticating with client certificates."""

    def setUp(self):
        super().setUp()
        self.replicas = []

    def tearDown(self):
        stop_all(self, self.replicas)
        super().tearDown()

    def replica(self, client, kubeconfig):
        r = KubeconfigReplica(self.srv, client, self.tmp, kubeconfig)
        self.replicas.append(r)
        return r

    def lease_spec(self):
        status, obj = self.srv.get_lease(NS, "demo", client=TOKEN)
        return obj["spec"] if status == 200 else None

    def assert_elect(self, clients, files):
        for c in clients:
            self.replica(c, self.srv.cert_kubeconfig(c, files=files)).start()
        watch = Watcher(self, self.replicas)
        leader = watch.one_leader(ELECTION_BOUND)
        watch.until(lambda snap, _: all(doc and doc["leader"] == leader
                                        for _, doc in snap.values()),
                    RETRY * 3 + 2, "the standby to see the leader")
        self.assertEqual(self.lease_spec()["holderIdentity"], leader)
        writers = self.writers("demo")
        self.assertTrue(writers, "no writes to the Lease")
        self.assertEqual(writers[0], leader, "the acquiring write came from the leader")
        self.assertLessEqual(set(writers), set(clients))

    def test_rsa_certificates_inline_elect(self):
        self.assert_elect(RSA, files=False)

    def test_ec_certificate_files_elect(self):
        self.assert_elect(EC, files=True)

    @unittest.skipUnless(shutil.which("openssl"), "the openssl command is not installed")
    def test_ec_key_in_sec1_form_elects(self):
        # "BEGIN EC PRIVATE KEY", as k3s and some CAs write EC keys.
        kubeconfig = self.srv.sec1_kubeconfig("ec1")
        key = user_fields(kubeconfig)["client-key"]
        self.assertTrue(read(key).startswith(b"-----BEGIN EC PRIVATE KEY-----"))
        r = self.replica("ec1", kubeconfig).start()
        wait_until(r.is_leader, ELECTION_BOUND, what="ec1 to lead with its SEC1 key")
        self.assertEqual(self.lease_spec()["holderIdentity"], "ec1")

    def test_token_and_certificate_replicas_hand_over(self):
        cert = self.replica("rsa1", self.srv.cert_kubeconfig("rsa1")).start()
        watch = Watcher(self, self.replicas)
        watch.until(lambda _, leaders: leaders == ["rsa1"], ELECTION_BOUND,
                    "the certificate replica to lead")
        tok = self.replica(TOKEN, self.srv.kubeconfig(TOKEN)).start()
        term = cert.leader()[1]["term"]
        # Faults follow the certificate's name: cut rsa1 off and the token replica
        # takes over once the Lease expires.
        self.srv.set_faults("rsa1", partition="hang")
        watch.until(lambda _, leaders: leaders == [TOKEN], ELECTION_BOUND + RENEW,
                    "the token replica to take over")
        self.assertEqual(self.lease_spec()["holderIdentity"], TOKEN)
        self.assertEqual(self.lease_spec()["leaseTransitions"], term + 1)
        self.srv.clear_faults()
        watch.until(lambda snap, _: snap.get("rsa1", (None, None))[1] and
                    snap["rsa1"][1]["leader"] == TOKEN, RETRY * 3 + RENEW + 2,
                    "the certificate replica to see the token replica lead")
        # A released Lease goes to the certificate replica at once.
        self.assertEqual(tok.stop(signal.SIGTERM), 0)
        released = time.monotonic()
        watch.until(lambda _, leaders: leaders == ["rsa1"], ELECTION_BOUND,
                    "the certificate replica to lead again")
        self.assertLess(time.monotonic() - released, LEASE, "waited for expiry, not release")
        self.assertEqual(self.lease_spec()["holderIdentity"], "rsa1")
        self.assertEqual(self.lease_spec()["leaseTransitions"], term + 2)
        self.assertEqual(self.writers("demo")[-1], "rsa1")
        self.assertEqual([w for w in self.writers("demo") if w not in ("rsa1", TOKEN)], [])

    def test_foreign_ca_certificate_never_leads(self):
        crt, key = foreign_certificate(self.tmp, "ec1")
        kc = write_kubeconfig(os.path.join(self.tmp, "kubeconfig-foreign"), self.srv.url,
                              self.srv.ca, "ec1", cert=crt, key=key)
        r = self.replica("ec1", kc).start()

        def rejected():
            self.assertFalse(r.is_leader(), "a foreign certificate got leadership")
            status, body = r.get("/healthz")
            return status == 500 and b"rejected our credentials" in body and body
        body = wait_until(rejected, RENEW + 4 * RETRY + 5, what="/healthz to report a 401")
        self.assertIn(b"401", body)
        self.assertIn("HTTP 401", r.log())
        self.assertTrue(r.alive())
        self.assertIsNone(self.lease_spec())
        self.assertEqual(self.writers("demo"), [])
        stats = self.srv.stats()
        self.assertNotIn("ec1", stats)
        self.assertTrue(any("401" in codes for codes in stats["anonymous"].values()), stats)


if __name__ == "__main__":
    unittest.main(verbosity=2)
