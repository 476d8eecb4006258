# SPDX-License-Identifier: Apache-2.0
# pytest tests of the rkv Python module (docs/python.md), run in the RDMA sandbox by
# tests/integration/python.sh against two kvservers (conftest.py has the environment).
#
# Contract: each test uses its own keys (a random prefix), so tests are independent and may run in
# any order against the same servers. No test asserts a timing (the sandbox's stack is emulated);
# the GIL test asserts that another thread made progress during one blocking call.
import os
import pickle
import socket
import sys
import threading
import time
import uuid

import pytest

import rkv

TIMEOUT = 11           # rkv::Code::kTimeout
UNAUTHENTICATED = 13   # rkv::Code::kUnauthenticated


def unique(name):
    return f"py-{uuid.uuid4().hex[:12]}-{name}".encode()


# --- no server needed ------------------------------------------------------------------------

def test_exception_classes():
    assert issubclass(rkv.Error, Exception)
    expected = {1: "NOT_FOUND", 2: "TABLE_FULL", 3: "TOO_LARGE", 4: "BAD_REQUEST",
                5: "INVALID_ARGUMENT", 6: "CONNECTION_LOST", 7: "SERVER_RESTARTED",
                8: "RETRIES_EXHAUSTED", 9: "IO_ERROR", 10: "PROTOCOL_ERROR", 11: "TIMEOUT",
                12: "PARAM_MISMATCH", 13: "UNAUTHENTICATED", 14: "BUSY",
                15: "MOVED", 16: "TRY_AGAIN", 17: "UNAVAILABLE"}
    assert {code: cls.code_name for code, cls in rkv.CODES.items()} == expected
    for code, cls in rkv.CODES.items():
        assert issubclass(cls, rkv.Error) and cls.code == code
    assert rkv.Timeout.code == TIMEOUT and rkv.Unauthenticated.code == UNAUTHENTICATED
    e = rkv.Unauthenticated("wrong token", 13, "UNAUTHENTICATED")
    assert str(e) == "UNAUTHENTICATED: wrong token" and e.message == "wrong token"
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is rkv.Unauthenticated and back.code == 13 and back.message == "wrong token"


def test_unknown_option_is_type_error():
    with pytest.raises(TypeError, match="no_such_option"):
        rkv.Client("127.0.0.1:1", no_such_option=1)
    with pytest.raises(TypeError, match="rpc_timeout_ms"):
        rkv.Client("127.0.0.1:1", rpc_timeout_ms="10")
    with pytest.raises(TypeError, match="auto_reconnect"):
        rkv.Client("127.0.0.1:1", auto_reconnect=1)


def test_bad_option_values_are_invalid_argument():
    with pytest.raises(rkv.InvalidArgument) as e:
        rkv.Client("127.0.0.1:1", exchange="carrier-pigeon")
    assert e.value.code == 5 and e.value.code_name == "INVALID_ARGUMENT"
    with pytest.raises(rkv.InvalidArgument, match="not both"):
        rkv.Client("127.0.0.1:1", auth_token=b"x" * 40, auth_token_file="/nonexistent")
    with pytest.raises(rkv.InvalidArgument, match="/nonexistent"):
        rkv.Client("127.0.0.1:1", auth_token_file="/nonexistent")
    with pytest.raises(rkv.InvalidArgument, match="retry_cnt"):
        rkv.Client("127.0.0.1:1", retry_cnt=8)
    with pytest.raises(rkv.InvalidArgument, match="reply_spin_us"):
        rkv.Client("127.0.0.1:1", reply_spin_us=-2)


def test_token_file_checks_as_kvctl(tmp_path):
    d = tmp_path / "tok"
    d.mkdir(mode=0o700)
    loose = d / "loose"
    loose.write_text("0123456789abcdef0123456789abcdef0123456789abcdef\n")
    loose.chmod(0o644)
    with pytest.raises(rkv.InvalidArgument, match="chmod 600"):
        rkv.Client("127.0.0.1:1", auth_token_file=loose)
    short = d / "short"
    short.write_text("0123456789abcdef0123456789abcde \t\r\n")  # 31 bytes once stripped
    short.chmod(0o600)
    with pytest.raises(rkv.InvalidArgument, match="at least 32"):
        rkv.Client("127.0.0.1:1", auth_token_file=str(short))


# --- against the servers ---------------------------------------------------------------------

def test_put_get_delete_roundtrip(client):
    random_value = os.urandom(64 * 1024)
    cases = {
        unique("empty"): b"",
        unique("nul"): b"a\x00b\x00\x00c",
        unique("\x00key\x00"): b"\x00",
        unique("big"): random_value,
    }
    for key, value in cases.items():
        client.put(key, value)
    for key, value in cases.items():
        got = client.get(key)
        assert type(got) is bytes and got == value
    for key in cases:
        assert client.delete(key) is True
        assert client.get(key) is None
        assert client.delete(key) is False


def test_bytes_like_and_str_keys(client):
    key = unique("str")
    client.put(key.decode(), "välue")               # str: encoded as UTF-8
    assert client.get(key) == "välue".encode()
    assert client.get(bytearray(key)) == "välue".encode()
    client.put(memoryview(key), bytearray(b"\x01\x02"))
    assert client.get(key.decode()) == b"\x01\x02"
    with pytest.raises(TypeError, match="key"):
        client.get(12)
    with pytest.raises(TypeError, match="value"):
        client.put(key, 3.5)


def test_missing_key_is_none(client):
    assert client.get(unique("never-written")) is None
    assert client.delete(unique("never-written")) is False


def test_multi_get(client):
    keys = [unique(f"m{i}") for i in range(40)]
    for i, k in enumerate(keys):
        if i % 3 != 0:
            client.put(k, b"v%d" % i)
    got = client.multi_get(keys)
    assert got == [None if i % 3 == 0 else b"v%d" % i for i in range(40)]
    assert client.multi_get([]) == []
    assert client.multi_get(iter(keys[:2])) == got[:2]
    with pytest.raises(TypeError):
        client.multi_get(b"one-key")


def test_execute(client):
    a, b, gone = unique("xa"), unique("xb"), unique("xg")
    client.put(a, b"old")
    client.put(gone, b"x")
    ops = [("put", b, b"new"), ("get", a), ("get", unique("absent")), ("delete", gone),
           ("delete", unique("never")), ("put", b"", b"empty key"), ("put", a, b"v" * 3000)]
    got = client.execute(ops)
    assert got[0] is True
    assert got[1] in (b"old", b"v" * 3000)  # the GET runs alongside the batch's writes
    assert got[2] is None
    assert got[3] is True and got[4] is False
    assert isinstance(got[5], rkv.InvalidArgument)
    assert got[6] is True
    assert client.get(b) == b"new" and client.get(gone) is None and client.get(a) == b"v" * 3000
    # More writes than the server's credits, applied in order.
    many = [("put", b, b"%d" % i) for i in range(100)]
    assert client.execute(many) == [True] * 100
    assert client.get(b) == b"99"
    assert client.execute([]) == []
    with pytest.raises(ValueError):
        client.execute([("scan", a)])
    with pytest.raises(ValueError):
        client.execute([("put", a)])
    with pytest.raises(TypeError):
        client.execute(b"get")


def test_stats(client):
    client.put(unique("s"), b"x")
    stats = client.stats()
    assert isinstance(stats, dict) and stats
    assert all(isinstance(k, str) and isinstance(v, (int, str)) for k, v in stats.items())
    assert isinstance(stats.get("connections_active"), int) and stats["connections_active"] >= 1


def test_counters(client):
    before = client.counters
    assert set(before) == {"gets", "reads_posted", "round_trips", "checksum_retries", "rpcs",
                           "reconnects", "server_restarts", "bytes_read", "cache_hits",
                           "cache_misses"}
    key = unique("c")
    client.put(key, b"1")
    client.get(key)
    client.multi_get([key, unique("c2")])
    after = client.counters
    assert after["gets"] == before["gets"] + 3
    assert after["rpcs"] >= before["rpcs"] + 1
    assert after["reads_posted"] > before["reads_posted"]
    assert after["bytes_read"] > before["bytes_read"]
    # The put's reply told the client where the key lives: the get read its slot (a hit).
    assert after["cache_hits"] >= before["cache_hits"] + 1


def test_server_info(client, addr):
    info = client.server_info
    for name in ("instance_id", "rkey", "region_size", "num_buckets", "max_key_size",
                 "max_value_size", "protocol_version", "port", "qp_num", "path_mtu"):
        assert isinstance(info[name], int), name
    assert info["max_key_size"] == 1024 and info["max_value_size"] == 65536
    assert info["region_size"] > 0 and info["num_buckets"] > 0 and info["qp_num"] > 0
    assert info["path_mtu"] in (256, 512, 1024, 2048, 4096)
    assert info["exchange"] == "rdma_cm"
    assert info["link_layer"] == "Ethernet" and info["device"]
    assert isinstance(info["gid_index"], int)
    assert info["local"]["qp_num"] == info["qp_num"]
    assert info["peer"]["qp_num"] > 0 and info["local"]["gid"]


def test_server_info_memory_rows(client, addr, token_file):
    """The memory rows of the connection table are the ones in use (issue 22): local = what
    this client's READs use, peer = what the server granted this connection; a private,
    non-zero rkey, the region's size and the zero-based address 0 on both sides."""
    info = client.server_info
    for side in ("local", "peer"):
        assert info[side]["rkey"] == info["rkey"] != 0, (side, info[side]["rkey"], info["rkey"])
        assert info[side]["region_size"] == info["region_size"] > 0, side
        assert info[side]["remote_addr"] == info["region_addr"] == 0, side
    # Another connection is granted another rkey, and its table says so too.
    with rkv.Client(addr, auth_token_file=token_file) as other:
        o = other.server_info
        assert o["rkey"] != info["rkey"]
        assert o["local"]["rkey"] == o["peer"]["rkey"] == o["rkey"]


def test_replies_awaited_asleep(addr, token_file):
    # reply_spin_us=0: every PUT/DELETE reply is waited for on a completion channel.
    with rkv.Client(addr, auth_token_file=token_file, reply_spin_us=0) as c:
        key = unique("asleep")
        for i in range(20):
            c.put(key, b"v%d" % i)
        assert c.get(key) == b"v19"
        c.delete(key)
        assert c.get(key) is None


def test_tcp_exchange(addr, token_file):
    with rkv.Client(addr, auth_token_file=token_file, exchange="tcp") as c:
        key = unique("tcp")
        c.put(key, b"manual mode")
        assert c.get(key) == b"manual mode"
        assert c.server_info["exchange"] == "tcp"


def test_auth_right_token(addr, token_file):
    token = open(token_file, "rb").read().rstrip()
    with rkv.Client(addr, auth_token=token) as c:       # bytes
        c.put(unique("a"), b"ok")
    with rkv.Client(addr, auth_token=token.decode()) as c:  # str
        assert c.get(unique("absent")) is None


def test_auth_wrong_token(addr, wrong_token_file):
    with pytest.raises(rkv.Unauthenticated) as e:
        rkv.Client(addr, auth_token_file=wrong_token_file)
    assert e.value.code == UNAUTHENTICATED and e.value.code_name == "UNAUTHENTICATED"
    assert isinstance(e.value, rkv.Error) and e.value.message


def test_auth_no_token(addr):
    with pytest.raises(rkv.Unauthenticated, match="requires authentication") as e:
        rkv.Client(addr)
    assert e.value.code == UNAUTHENTICATED


def test_open_server_without_token(open_addr):
    with rkv.Client(open_addr) as c:
        key = unique("open")
        c.put(key, b"v")
        assert c.get(key) == b"v"


def test_key_limits_raise_with_code(client):
    with pytest.raises(rkv.TooLarge) as e:      # rkv::Client: a key over max_key_size
        client.get(b"k" * 1025)
    assert e.value.code == 3
    with pytest.raises(rkv.TooLarge):
        client.put(unique("v"), b"v" * (65536 + 1))
    with pytest.raises(rkv.InvalidArgument) as e:
        client.get(b"")
    assert e.value.code == 5 and "empty key" in e.value.message
    # The connection is still good after the refusals.
    key = unique("after")
    client.put(key, b"fine")
    assert client.get(key) == b"fine"


def test_connect_to_dead_port_raises_with_code(dead_addr):
    with pytest.raises(rkv.Error) as e:
        rkv.Client(dead_addr, connect_timeout_ms=5000)
    assert isinstance(e.value.code, int) and e.value.code != 0
    assert type(e.value) is rkv.CODES[e.value.code]
    assert e.value.code_name == rkv.CODES[e.value.code].code_name


def test_closed_client_raises(addr, token_file):
    c = rkv.Client(addr, auth_token_file=token_file)
    c.close()
    assert c.closed
    for call in (lambda: c.get(b"k"), lambda: c.put(b"k", b"v"), lambda: c.delete(b"k"),
                 lambda: c.multi_get([b"k"]), c.stats, c.reconnect, lambda: c.counters,
                 lambda: c.server_info):
        with pytest.raises(rkv.Error, match="closed"):
            call()
    c.close()  # idempotent


def test_context_manager_closes(addr, token_file):
    with rkv.Client(addr, auth_token_file=token_file) as c:
        assert not c.closed
        key = unique("cm")
        c.put(key, b"x")
    assert c.closed
    with pytest.raises(rkv.InvalidArgument):
        c.get(key)
    with pytest.raises(ZeroDivisionError):      # an exception inside the block propagates
        with rkv.Client(addr, auth_token_file=token_file) as c2:
            1 / 0
    assert c2.closed


def test_reconnect(client):
    key = unique("r")
    client.put(key, b"before")
    restarted = client.reconnect()
    assert restarted is False          # the same server instance
    assert client.get(key) == b"before"
    assert client.counters["reconnects"] == 1


def test_gil_released_during_blocking_call(host, token_file):
    # A TCP listener that never answers: a manual-mode (exchange="tcp") connect to it sends its
    # record and then blocks until exchange_timeout_ms passes. With a very long switch interval
    # the interpreter never takes the GIL from a thread: the ticker advances during the call only
    # if the call released it.
    silent = socket.socket()
    silent.bind((host, 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    ticks = 0
    stop = False

    def ticker():
        nonlocal ticks
        while not stop:
            ticks += 1
            time.sleep(0.001)

    old = sys.getswitchinterval()
    sys.setswitchinterval(60)
    t = threading.Thread(target=ticker)
    t.start()
    try:
        before = ticks
        with pytest.raises(rkv.Error) as e:
            rkv.Client(f"{host}:{port}", exchange="tcp", exchange_timeout_ms=1500,
                       connect_timeout_ms=1500, auth_token_file=token_file)
        during = ticks - before
    finally:
        stop = True
        sys.setswitchinterval(old)
        t.join()
        silent.close()
    assert e.value.code != 0
    assert during > 0, "no other thread ran while Client() waited: the GIL was held"


def test_gil_released_during_gets(client):
    # Same idea with real traffic: many gets while a ticker thread must get the GIL from them.
    key = unique("g")
    client.put(key, b"v")
    ticks = 0
    stop = False

    def ticker():
        nonlocal ticks
        while not stop:
            ticks += 1
            time.sleep(0.0005)

    old = sys.getswitchinterval()
    sys.setswitchinterval(60)
    t = threading.Thread(target=ticker)
    t.start()
    try:
        before = ticks
        for _ in range(500):
            assert client.get(key) == b"v"
        during = ticks - before
    finally:
        stop = True
        sys.setswitchinterval(old)
        t.join()
    assert during > 0


def test_two_threads_share_one_client(client):
    n = 300
    errors = []

    def worker(tag):
        try:
            keys = [unique(f"{tag}{i}") for i in range(n)]
            for i, k in enumerate(keys):
                client.put(k, tag.encode() * (i % 50 + 1))
            for i, k in enumerate(keys):
                assert client.get(k) == tag.encode() * (i % 50 + 1)
            got = client.multi_get(keys[:20] + [unique("absent")])
            assert got == [tag.encode() * (i % 50 + 1) for i in range(20)] + [None]
            for k in keys[::2]:
                assert client.delete(k) is True
            assert client.get(keys[0]) is None and client.get(keys[1]) is not None
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(tag,)) for tag in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert client.counters["gets"] >= 3 * (n + 21 + 2)


def test_close_while_another_thread_works(addr, token_file):
    c = rkv.Client(addr, auth_token_file=token_file)
    key = unique("close")
    c.put(key, b"v")
    outcome = []

    def reader():
        try:
            while True:
                assert c.get(key) == b"v"
        except rkv.InvalidArgument as e:   # the client was closed under it
            outcome.append(e)
        except BaseException as e:
            outcome.append(e)

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.2)
    c.close()
    t.join()
    assert len(outcome) == 1 and isinstance(outcome[0], rkv.InvalidArgument), outcome


def test_installed_module_location():
    # python.sh runs this (and the round trip) a second time with PYTHONPATH at the installed
    # dist-packages: it checks that the installed package, not the build tree's, was imported.
    want = os.environ.get("RKV_PY_EXPECT_DIR")
    if not want:
        pytest.skip("RKV_PY_EXPECT_DIR is not set (only for the installed-module run)")
    assert os.path.realpath(rkv.__file__).startswith(os.path.realpath(want))
    assert os.path.realpath(rkv._rkv.__file__).startswith(os.path.realpath(want))
    # The shared client library (when the module links it) comes from the prefix too (RPATH).
    with open("/proc/self/maps") as maps:
        librkv = {line.split()[-1] for line in maps if "/librkv.so" in line}
    for lib in librkv:
        assert os.path.realpath(lib).startswith(os.path.realpath(want)), lib


def test_paths_with_nul_are_refused():
    # A C path ends at the first NUL: "/tmp/a\0b" must not open /tmp/a.
    with pytest.raises(ValueError):
        rkv.Client("127.0.0.1:1", auth_token_file="/tmp/a\0b")


def test_non_utf8_error_text_is_still_an_rkv_error():
    # The message names the (non-UTF-8) path: it must arrive as rkv.Error, bytes escaped.
    with pytest.raises(rkv.Error) as e:
        rkv.Client("127.0.0.1:1", auth_token_file=b"/nonexistent\xff/token")
    assert "\\xff" in str(e.value)
