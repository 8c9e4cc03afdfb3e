"""The test hosts themselves: separate network stacks and names, reachable from each other."""

import sys

from netns import hosts

_SERVE = """
import socket, sys
s = socket.create_server(("0.0.0.0", 29400))
print("listening", flush=True)
c, peer = s.accept()
c.sendall(socket.gethostname().encode() + b" " + peer[0].encode())
c.close()
"""

_ASK = """
import socket, sys
for _ in range(200):
    try:
        c = socket.create_connection((sys.argv[1], 29400), timeout=30)
        break
    except ConnectionRefusedError:
        import time; time.sleep(0.05)
print(c.recv(200).decode())
"""


def test_hosts_reach_each_other_by_name_and_keep_their_own_names():
    with hosts(2) as (a, b):
        assert a.run(["hostname"]).stdout.strip() == "node0"
        assert b.run(["hostname"]).stdout.strip() == "node1"
        assert b.run(["getent", "hosts", "node0"]).stdout.split()[0] == a.address
        server = a.popen([sys.executable, "-c", _SERVE], stdout=-1)
        try:
            assert server.stdout is not None
            assert server.stdout.readline().strip() == "listening"
            done = b.run([sys.executable, "-c", _ASK, "node0"])
            assert done.returncode == 0, done.stderr
            assert done.stdout.split() == ["node0", b.address]
        finally:
            server.kill()
            server.communicate()


def test_a_host_is_not_reachable_from_outside_its_network():
    with hosts(1) as (a,):
        done = a.run(["ip", "route"])
        assert "default" not in done.stdout
        assert a.run(["getent", "hosts", "node0"]).stdout.split()[0] == a.address
